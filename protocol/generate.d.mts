export function generateTrajectoryTypes(): Promise<string>;
export function generateRpcTypes(): Promise<string>;
