import { strict as assert } from 'node:assert';
import { lineDiff } from '../../webview/replay/lineDiff';

describe('line diff of a re-run tool call', () => {
  it('keeps common lines and marks what the current outcome dropped and added, in order', () => {
    const before = ['{', '  "city": "Paris",', '  "temp": 21', '}'].join('\n');
    const after = ['{', '  "city": "Paris",', '  "temp": 23,', '  "unit": "C"', '}'].join('\n');
    assert.deepEqual(lineDiff(before, after), [
      { kind: 'same', text: '{' },
      { kind: 'same', text: '  "city": "Paris",' },
      { kind: 'removed', text: '  "temp": 21' },
      { kind: 'added', text: '  "temp": 23,' },
      { kind: 'added', text: '  "unit": "C"' },
      { kind: 'same', text: '}' },
    ]);
  });

  it('says nothing changed for equal outcomes, and falls back to whole sides for huge ones', () => {
    assert.ok(lineDiff('gold', 'gold').every((line) => line.kind === 'same'));
    const many = Array.from({ length: 2500 }, (_, i) => `line ${i}`).join('\n');
    const diff = lineDiff(many, `${many}\nmore`);
    assert.equal(diff.filter((line) => line.kind === 'removed').length, 2500);
    assert.equal(diff.filter((line) => line.kind === 'added').length, 2501);
  });
});
