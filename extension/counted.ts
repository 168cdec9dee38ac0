// A count with its noun in the number it takes ("1 tool call", "2 tool calls"), for every count the editor says.

/** `count` and `noun`, the noun plural (`plural`, else noun + "s") unless the count is exactly 1. */
export function counted(count: number, noun: string, plural = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : plural}`;
}
