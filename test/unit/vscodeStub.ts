// The part of the `vscode` API the Runs view builds its rows with, enough to call RunsTreeProvider.getTreeItem
// outside VS Code. Importing this module makes `require('vscode')` return it; import it before the module under
// test.
import Module from 'node:module';

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class ThemeIcon {
  constructor(
    readonly id: string,
    readonly color?: ThemeColor,
  ) {}
}

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}

export class TreeItem {
  description?: string;
  iconPath?: ThemeIcon;
  id?: string;
  contextValue?: string;
  constructor(
    readonly label: string,
    readonly collapsibleState: TreeItemCollapsibleState,
  ) {}
}

export class EventEmitter<T> {
  readonly event = (_listener: (value: T) => void) => ({ dispose: () => undefined });
  fire(_value: T): void {}
}

const stub = { ThemeColor, ThemeIcon, TreeItemCollapsibleState, TreeItem, EventEmitter };
const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
const load = loader._load;
loader._load = function (request: string, ...rest: unknown[]) {
  return request === 'vscode' ? stub : load.call(this, request, ...rest);
};
