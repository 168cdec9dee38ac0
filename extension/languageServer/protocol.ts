// The custom messages between the extension (language client) and this server, each a typed constant declared once
// (vscode-eslint's NotificationType pattern): both ends name the constant, so its method and its params cannot
// drift apart. vscode-jsonrpc's platform-neutral entry point is the one both the client and the server can load.
import { NotificationType, RequestType } from 'vscode-jsonrpc';
import type { ConfigMemoryPlanResult, InitializeResult } from '../../protocol/generated/rpc';

/** The devices a trainer server reports in its `initialize` result (protocol/schemas/rpc.schema.json). */
export type TrainerDevicesParams = InitializeResult['devices'];

/** Client -> server, sent by the extension host (languageClient.ts) after it connects to a trainer server: the
 *  devices its `initialize` result reported, or null after it disconnects, so hovers on `model.*` can say what the
 *  run will have to work with and whether the model roughly fits. */
export const trainerDevicesNotification = new NotificationType<TrainerDevicesParams | null>('agentRl/trainerDevices');

/** What the trainer answers `config/memoryPlan` with, or, when the request failed (an invalid config, a lost
 *  connection), why, as `unavailable`. */
export type MemoryPlanResult = ConfigMemoryPlanResult;

/** The run config a hover is over: its parsed contents and its file's path. */
export interface MemoryPlanParams {
  config: Record<string, unknown>;
  configPath: string;
}

/** Server -> client, on a hover over `model.*` while a trainer is connected: the extension host asks the trainer to
 *  plan the run's peak memory (`config/memoryPlan`) and answers with the plan, or null when no trainer is connected.
 *  The formula lives in the trainer alone (agentrl/learning/memory_plan.py). */
export const memoryPlanRequest = new RequestType<MemoryPlanParams, MemoryPlanResult | null, void>('agentRl/memoryPlan');

/** The `source` of every diagnostic this server publishes: its quick fixes, and the editor's check before a run starts
 *  (configProblems.ts), tell its problems from other extensions' and from the health alerts on the same file. */
export const RUN_CONFIG_DIAGNOSTIC_SOURCE = 'agent-rl';
