// "Add to Training Set": the buttons the episode list, a turn of the episode view and the group view offer. It only asks: the host
// holds the episode's record, appends it to the set the user picks and says how it went (extension/trainingSets.ts).
import { h, icon } from '../dom';

/** In a row of the episode list: the whole episode. Its click and Enter stay its own (the row opens the episode). */
export function addEpisodeButton(id: string, add: () => void): HTMLElement {
  return button({ class: 'add-to-set', 'aria-label': `Add ${id} to Training Set` }, 'Add to Training Set', add);
}

/** In the group view's toolbar: every sample of the group, whole. */
export function addGroupButton(samples: number, add: () => void): HTMLElement {
  return button(
    { id: 'add-group-to-set' },
    `Add the ${samples} samples of this group to a training set`,
    add,
    ' Add Group to Training Set',
  );
}

/** On a turn of the episode view: the turns before it are context, learned from this one on. */
export function addFromTurnButton(turn: number, add: () => void): HTMLElement {
  return h(
    'section',
    { class: 'add-to-set-here', 'aria-label': 'Add to Training Set from This Turn' },
    button(
      { id: 'add-to-set-here' },
      `Add this episode to a training set, learned from turn ${turn} on (the turns before it are context)`,
      add,
      ' Add to Training Set from This Turn',
    ),
  );
}

function button(attrs: Record<string, string>, title: string, add: () => void, text?: string): HTMLElement {
  const element = h('button', { ...attrs, title }, icon('add'), ...(text ? [text] : []));
  element.addEventListener('click', (event) => {
    event.stopPropagation();
    add();
  });
  element.addEventListener('keydown', (event) => event.stopPropagation());
  return element;
}
