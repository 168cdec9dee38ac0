// Custom messages between the extension (language client) and this server.

/** Client -> server, after the extension connects to a trainer: the devices its `initialize` reported,
 *  so hovers on `model.*` can say what the run will have to work with. */
export const TRAINER_DEVICES_NOTIFICATION = 'agentRl/trainerDevices';

export interface TrainerDevicesParams {
  cpu: { name: string; cores: number; memoryBytes?: number };
  gpus: Array<{ name: string; memoryBytes: number }>;
}
