/** Just enough ISO base media file format (HEIF's container) to read header boxes without decoding. */

export function u32(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0;
}

export function u16(bytes: Uint8Array, at: number): number {
  return (bytes[at]! << 8) | bytes[at + 1]!;
}

export interface Box {
  type: string;
  /** First byte after the box header. */
  body: number;
  /** One past the box's last byte. */
  end: number;
}

/**
 * The boxes directly inside [start, end). Stops quietly at the first box that does not fit: the
 * caller sees fewer boxes, never an out-of-range read. At most `max` boxes, so a hostile file made of
 * millions of 8-byte boxes cannot hold the event loop.
 */
export function boxes(bytes: Uint8Array, start: number, end: number, max = 4096): Box[] {
  const found: Box[] = [];
  let at = start;
  while (at + 8 <= end && found.length < max) {
    let size = u32(bytes, at);
    let body = at + 8;
    if (size === 1) {
      // 64-bit size: header boxes never need it, so a high word means garbage.
      if (at + 16 > end || u32(bytes, at + 8) !== 0) break;
      size = u32(bytes, at + 12);
      body = at + 16;
    } else if (size === 0) size = end - at;
    if (size < body - at || at + size > end) break;
    found.push({ type: String.fromCharCode(...bytes.subarray(at + 4, at + 8)), body, end: at + size });
    at += size;
  }
  return found;
}

/** The first child box of `type` inside `parent`; `full` when `parent` is a full box (version + flags). */
export function child(
  bytes: Uint8Array,
  parent: Box | undefined,
  type: string,
  full = false,
): Box | undefined {
  if (!parent) return undefined;
  return boxes(bytes, parent.body + (full ? 4 : 0), parent.end).find((b) => b.type === type);
}

export function fileBox(bytes: Uint8Array): Box {
  return { type: '', body: 0, end: bytes.length };
}
