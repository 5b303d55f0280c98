// What index.d.ts needs that neither Debian's TypeScript 4.8 (node-typescript)
// nor its lib files have, without @types/node: Symbol.asyncDispose (lib
// esnext.disposable, TypeScript 5.2), node:events' EventEmitter and the
// AbortSignal of Node's globals. Signatures as in @types/node 20.
interface SymbolConstructor {
  readonly asyncDispose: unique symbol;
}

interface AbortSignal {
  readonly aborted: boolean;
  readonly reason: any;
  onabort: null | ((this: AbortSignal, event: any) => any);
  throwIfAborted(): void;
  addEventListener(type: 'abort', listener: (this: AbortSignal, event: any) => any, options?: boolean | { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: (this: AbortSignal, event: any) => any): void;
}
declare var AbortSignal: {
  prototype: AbortSignal;
  new (): AbortSignal;
  abort(reason?: any): AbortSignal;
  timeout(milliseconds: number): AbortSignal;
};
interface AbortController {
  readonly signal: AbortSignal;
  abort(reason?: any): void;
}
declare var AbortController: { prototype: AbortController; new (): AbortController };

declare module 'node:events' {
  class EventEmitter {
    constructor(options?: { captureRejections?: boolean });
    addListener(eventName: string | symbol, listener: (...args: any[]) => void): this;
    on(eventName: string | symbol, listener: (...args: any[]) => void): this;
    once(eventName: string | symbol, listener: (...args: any[]) => void): this;
    off(eventName: string | symbol, listener: (...args: any[]) => void): this;
    removeListener(eventName: string | symbol, listener: (...args: any[]) => void): this;
    removeAllListeners(event?: string | symbol): this;
    emit(eventName: string | symbol, ...args: any[]): boolean;
    listenerCount(eventName: string | symbol): number;
  }
  export { EventEmitter };
}
