// The inspector's Prompt tab: the messages the episode began with, and the tools the model was shown, each a card
// with its description and parameters (the JSON Schema a click away).
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { h, pretty } from '../dom';
import { describeTools, type ToolDescription } from './toolSchemas';

/** The Prompt step: the messages the episode started from, and the tools the model was shown with them (which the
 *  chat template writes into the prompt's tokens, where the record keeps them apart). */
export function promptTab(record: TrajectoryRecord): HTMLElement {
  const tools = describeTools(record.tools);
  return h(
    'div',
    { class: 'io prompt' },
    ...record.prompt.map((m) =>
      h('div', {}, h('h4', {}, m.role === 'system' ? 'System prompt' : m.role), h('pre', {}, m.content)),
    ),
    h(
      'h4',
      { id: 'prompt-tools' },
      tools.length
        ? `Tools the model was shown (${tools.length}), as the chat template puts them in the prompt`
        : 'No tools',
    ),
    ...tools.map(toolCard),
  );
}

function toolCard(tool: ToolDescription): HTMLElement {
  return h(
    'section',
    { class: 'tool-card', 'aria-label': `Tool ${tool.name}` },
    h('code', { class: 'tool-name' }, tool.name),
    tool.description ? h('p', { class: 'tool-description' }, tool.description) : null,
    tool.parameters.length
      ? h(
          'ul',
          { class: 'tool-parameters', 'aria-label': `Parameters of ${tool.name}` },
          ...tool.parameters.map((p) =>
            h(
              'li',
              {},
              h('code', {}, p.name),
              ` ${p.type}${p.required ? ', required' : ''}`,
              p.description ? ` — ${p.description}` : '',
            ),
          ),
        )
      : h('p', { class: 'tool-description' }, 'No parameters.'),
    h(
      'details',
      {},
      h('summary', {}, 'JSON Schema of the parameters'),
      h('pre', { class: 'json' }, pretty(tool.schema)),
    ),
  );
}
