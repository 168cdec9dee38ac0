export function generateTrajectoryTypes(): Promise<string>;
