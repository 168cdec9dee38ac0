export function generateTrajectoryTypes(): Promise<string>;
export function generateRpcTypes(): Promise<string>;
export function generateDoctorTypes(): Promise<string>;
export function generateTrainingSetTypes(): Promise<string>;
