// Trajectories in Harbor's Agent Trajectory Interchange Format (ATIF) read as our trajectory records, so the replay
// opens them: the reading of trainer-server/agentrl/run/atif.py (atif_to_record; its docstring has the whole mapping
// and what is left out), written again here because the extension runs no Python. Both are held to the files of
// protocol/examples/atif/ (test/unit/atif.test.ts, trainer-server/tests/test_atif.py), so they cannot drift.
// Pure: no `vscode`. An ATIF file is untrusted: every value is checked before it is used.
import type { Message, ToolCall, TrajectoryRecord, Turn } from '../../protocol/generated/trajectory';

type Json = Record<string, unknown>;

/** Where agentrl keeps, in an ATIF object's `extra`, what ATIF has no field for. */
const EXTRA_KEY = 'agentrl';
/** The versions this reads: any 1.x (of a later one, the fields this does not know are left aside). */
const ATIF_VERSION_PATTERN = /^ATIF-v1\.\d+$/;
const ROLE_OF_SOURCE = { system: 'system', user: 'user', agent: 'assistant' } as const;
type Source = keyof typeof ROLE_OF_SOURCE;

export const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Whether `document` declares itself an ATIF trajectory (any version). */
export const isAtif = (document: unknown): document is Json =>
  isObject(document) &&
  typeof document.schema_version === 'string' &&
  document.schema_version.startsWith('ATIF-') &&
  Array.isArray(document.steps);

/** What record_to_atif kept in an item's extra; {} for an item another tool wrote. */
function ours(item: Json): Json {
  const kept = isObject(item.extra) ? item.extra[EXTRA_KEY] : undefined;
  return isObject(kept) ? kept : {};
}

const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const objects = (value: unknown): Json[] => list(value).filter(isObject);
const results = (step: Json): Json[] => objects(isObject(step.observation) ? step.observation.results : undefined);
const count = (value: unknown): number => (typeof value === 'number' ? value : 0);

/** A message or result as text: a string as it is, a list of content parts (v1.6+) a line each. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  return objects(content)
    .map((part) => {
      if (part.type === 'text') return typeof part.text === 'string' ? part.text : '';
      if (part.type === 'image') {
        const path = isObject(part.source) && typeof part.source.path === 'string' ? part.source.path : '';
        return `[image: ${path}]`;
      }
      return `[${String(part.type)}]`;
    })
    .join('\n');
}

function sourceOf(step: Json, where: string): Source {
  if (step.source === 'system' || step.source === 'user' || step.source === 'agent') return step.source;
  throw new Error(`${where}.source is ${JSON.stringify(step.source)}, not "system", "user" or "agent"`);
}

/** The record of an ATIF trajectory, the `position`-th of its file (its group, and its id when it has no
 *  trajectory_id). Throws, saying why, for a document this cannot read. */
export function atifToRecord(trajectory: Json, position = 0): TrajectoryRecord {
  const version = trajectory.schema_version;
  if (!isAtif(trajectory)) throw new Error('not an ATIF trajectory: no schema_version "ATIF-v1.x" and steps list');
  if (!ATIF_VERSION_PATTERN.test(String(version))) throw new Error(`${String(version)}: this reads ATIF-v1.x`);
  const steps = list(trajectory.steps).map((step, i) => {
    if (!isObject(step)) throw new Error(`steps[${i}] is not an object`);
    return { step, source: sourceOf(step, `steps[${i}]`), where: `steps[${i}]` };
  });
  const live = steps.findIndex(({ step, source }) => source === 'agent' && !step.is_copied_context);
  const firstTurn = live < 0 ? steps.length : live;
  const prompt = steps.slice(0, firstTurn).flatMap(({ step, source }) => promptMessages(step, source));
  // Each turn's agent step, and what the agent read after it: its results that answer no call, then the user and
  // system steps up to the next agent step.
  const turnSteps: { step: Json; where: string; read: string[] }[] = [];
  for (const { step, source, where } of steps.slice(firstTurn)) {
    if (source === 'agent') {
      turnSteps.push({ step, where, read: [] });
      continue;
    }
    const read = turnSteps[turnSteps.length - 1].read;
    if (contentText(step.message)) read.push(contentText(step.message));
    read.push(
      ...results(step)
        .filter((r) => r.content != null)
        .map((r) => contentText(r.content)),
    );
  }
  const turns = turnSteps.map(({ step, where, read }, index) =>
    turn(step, where, index, read, index === turnSteps.length - 1),
  );
  const metrics = turnSteps.map(({ step }) => (isObject(step.metrics) ? step.metrics : {}));
  const responseTokens = metrics.reduce(
    (sum, m) => sum + (count(m.completion_tokens) || list(m.completion_token_ids).length),
    0,
  );
  const agent = isObject(trajectory.agent) ? trajectory.agent : {};
  const record: TrajectoryRecord = {
    schema_version: 1,
    id:
      typeof trajectory.trajectory_id === 'string' && trajectory.trajectory_id
        ? trajectory.trajectory_id
        : `atif-${position}`,
    run_id: typeof trajectory.session_id === 'string' ? trajectory.session_id : '',
    step: 0,
    group: position,
    sample: 0,
    task_id: '',
    status: 'finished',
    status_reason: null,
    reward: 0,
    outcome_reward: 0,
    reward_breakdown: {},
    advantage: null,
    final_answer: null,
    prompt,
    tools: objects(agent.tool_definitions),
    turns,
    stats: {
      num_turns: turns.length,
      num_tool_calls: turns.reduce((sum, t) => sum + t.tool_calls.length, 0),
      num_tool_errors: 0,
      response_tokens: responseTokens,
      // the largest context an agent step reports: the sequence the episode ended with
      total_tokens: Math.max(
        ...metrics.filter((m) => Object.keys(m).length).map((m) => count(m.prompt_tokens) + count(m.completion_tokens)),
        responseTokens,
      ),
    },
    tokens: { ids: [], text: [], role: [], turn: [], loss_mask: [], logprob: [], advantage: [] },
  };
  return { ...record, ...ours(trajectory) } as TrajectoryRecord;
}

function promptMessages(step: Json, source: Source): Message[] {
  const answers = results(step);
  const messages: Message[] = [];
  // a system step of message "" with results only carries tool messages (see record_to_atif)
  if (!(source === 'system' && contentText(step.message) === '' && answers.length)) {
    messages.push({ role: ROLE_OF_SOURCE[source], content: contentText(step.message), ...ours(step) } as Message);
  }
  for (const result of answers) messages.push({ role: 'tool', content: contentText(result.content), ...ours(result) });
  return messages;
}

function turn(step: Json, where: string, index: number, readAfter: string[], done: boolean): Turn {
  const calls = objects(step.tool_calls).map((call, i) => {
    if (typeof call.tool_call_id !== 'string' || typeof call.function_name !== 'string') {
      throw new Error(`${where}.tool_calls[${i}] has no string tool_call_id and function_name`);
    }
    return { call, id: call.tool_call_id, name: call.function_name };
  });
  const answers = new Map<string, Json[]>(calls.map(({ id }) => [id, []]));
  const read: string[] = [];
  for (const result of results(step)) {
    const answered = typeof result.source_call_id === 'string' ? answers.get(result.source_call_id) : undefined;
    if (answered) answered.push(result);
    else if (result.content != null) read.push(contentText(result.content));
  }
  read.push(...readAfter);
  const found: Turn = {
    index,
    assistant: contentText(step.message),
    tool_calls: calls.map(({ call, id, name }) => toolCall(call, id, name, answers.get(id) ?? [])),
    observation: read.length ? read.join('\n') : null,
    process_reward: 0,
    done, // the last turn ended the episode
    finish_reason: 'stop',
    parse_error: null,
  };
  return { ...found, ...ours(step) } as Turn;
}

function toolCall(call: Json, id: string, name: string, answers: Json[]): ToolCall {
  // Json, not ToolCall: a result is any JSON value, which the generated type does not say
  const found: Json = {
    id,
    name,
    arguments: isObject(call.arguments) ? call.arguments : null,
    raw: '', // the text the model wrote is not in ATIF
    result: answers.length ? answers.map((answer) => contentText(answer.content)).join('\n') : null,
    error: null,
    error_kind: null,
    latency_ms: 0,
  };
  for (const answer of answers) if ('result' in ours(answer)) found.result = ours(answer).result;
  return { ...found, ...ours(call) } as unknown as ToolCall;
}
