import type { TestType, PlaywrightTestArgs, PlaywrightTestOptions, PlaywrightWorkerArgs, PlaywrightWorkerOptions } from '@playwright/test';
import type { Ephemail, Inbox } from './index.js';

export declare const test: TestType<PlaywrightTestArgs & PlaywrightTestOptions & { ephemail: Ephemail; inbox: Inbox }, PlaywrightWorkerArgs & PlaywrightWorkerOptions>;
export { expect } from '@playwright/test';
