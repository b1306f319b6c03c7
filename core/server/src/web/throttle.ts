import { createHash } from 'node:crypto';
import type { Database } from '@compresso/runtime';
import { visitorNetwork } from './compressor.ts';

/**
 * Log-in throttling, counted in the database so it holds across processes and restarts.
 *
 * Two subjects per attempt: the email (whoever asks, so a botnet spread over many addresses still
 * meets it) and the client network (an IPv4 address or IPv6 /64, so one client cannot spray many
 * emails). A subject's failures within WINDOW_MS count; past its free allowance it is locked for a
 * time that doubles with each further failure, up to MAX_LOCK_MS. Every wrong password is also
 * answered late (FAILURE_DELAY_MS, doubling per failure of that email): it costs a patient guesser
 * time and a parallel guesser nothing the lock-out does not already stop.
 */

export const WINDOW_MS = 15 * 60 * 1000;
export const EMAIL_FREE_FAILURES = 5;
export const NETWORK_FREE_FAILURES = 30;
const BASE_LOCK_MS = 30 * 1000;
const MAX_LOCK_MS = 15 * 60 * 1000;
const FAILURE_DELAY_MS = 250;
const MAX_FAILURE_DELAY_MS = 4000;

/** Subjects are hashed: the table then lists neither emails nor addresses. */
const subject = (kind: string, value: string) =>
  `${kind}:${createHash('sha256').update(`compresso-login:${kind}:${value}`).digest('hex').slice(0, 40)}`;

export function emailSubject(email: string): string {
  return subject('email', email.trim().toLowerCase());
}

export function networkSubject(address: string, kind = 'net'): string {
  return subject(kind, visitorNetwork(address));
}

/** Milliseconds until `subject` may try again (0: now). */
export async function lockedFor(db: Database, key: string, free: number, now = new Date()): Promise<number> {
  const counted = await db.loginFailures(key, new Date(now.getTime() - WINDOW_MS).toISOString());
  if (!counted || counted.failures < free) return 0;
  const lock = Math.min(MAX_LOCK_MS, BASE_LOCK_MS * 2 ** (counted.failures - free));
  return Math.max(0, new Date(counted.lastFailedAt).getTime() + lock - now.getTime());
}

/** Count a failure; returns how long to hold the answer back. */
export async function recordFailure(db: Database, key: string, now = new Date()): Promise<number> {
  const counted = await db.recordLoginFailure(
    key,
    now.toISOString(),
    new Date(now.getTime() - WINDOW_MS).toISOString(),
  );
  return Math.min(MAX_FAILURE_DELAY_MS, FAILURE_DELAY_MS * 2 ** (counted.failures - 1));
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
