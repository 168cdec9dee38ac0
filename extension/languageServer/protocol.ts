// Custom messages between the extension (language client) and this server.

/** Client -> server, sent by the extension host (languageClient.ts `notifyTrainerDevices`) after it connects to
 *  a trainer server: the devices its `initialize` result reported (or null after it disconnects), so hovers on
 *  `model.*` can say what the run will have to work with and whether the model roughly fits. */
export const TRAINER_DEVICES_NOTIFICATION = 'agentRl/trainerDevices';

export interface TrainerDevicesParams {
  cpu: { name: string; cores: number; memoryBytes?: number };
  gpus: Array<{ name: string; memoryBytes: number }>;
}
