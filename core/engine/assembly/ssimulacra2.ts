/**
 * SSIMULACRA2's pixel work in WebAssembly with 128-bit SIMD (AssemblyScript; built by
 * `npm run build:wasm -w @compresso/engine` into src/metric/ssimulacra2.wasm, which is committed and
 * checked against this source by src/metric/simd.test.ts). The same computation as
 * src/metric/ssimulacra2.ts, step for step — colour conversion, 2×2 downsampling, the 9-tap blur with
 * zero outside the image, the SSIM and edge maps and their norms, row sampling — with four pixels a
 * lane and the arithmetic in 32-bit floats (as the reference tool computes; the TypeScript version
 * computes in doubles and rounds where it stores), so the two agree to about 1e-4 of a point, not
 * to the last bit. The TypeScript side keeps what is not pixel work: checks, padding, alpha
 * compositing, which terms carry weight, and the packing of the 108 sub-scores.
 *
 * Memory: the host allocates with `alloc`/`release` (the runtime's TLSF allocator) and owns every
 * block; a prepared reference is one block of pointers (REF_* below) to its planes.
 */

// Constants of the metric (see src/metric/ssimulacra2.ts for their sources).
const M00: f32 = 0.3;
const M01: f32 = 0.622;
const M02: f32 = 0.078;
const M10: f32 = 0.23;
const M11: f32 = 0.692;
const M12: f32 = 0.078;
const M20: f32 = 0.24342268924547819;
const M21: f32 = 0.20476744424496821;
const M22: f32 = <f32>(1.0 - 0.24342268924547819 - 0.20476744424496821);
const BIAS: f32 = 0.0037930732552754493;
const C2: f32 = 0.0009;
const RADIUS: i32 = 4;
const SCALES: i32 = 6;
const KEPT: u8 = 2;

/** The blur's taps, centre first (set by `init` from the TypeScript kernel, so both use one). */
let K0: f32 = 0;
let K1: f32 = 0;
let K2: f32 = 0;
let K3: f32 = 0;
let K4: f32 = 0;
let CBRT_BIAS: f32 = 0;
/** sRGB code → linear light, 256 floats, filled by the host (the TypeScript table). */
const LUT: usize = memory.data(1024, 16);

export function init(k0: f32, k1: f32, k2: f32, k3: f32, k4: f32): usize {
  K0 = k0;
  K1 = k1;
  K2 = k2;
  K3 = k3;
  K4 = k4;
  CBRT_BIAS = cbrt1(BIAS);
  return LUT;
}

export function alloc(bytes: usize): usize {
  return heap.alloc(bytes);
}

export function release(ptr: usize): void {
  if (ptr) heap.free(ptr);
}

function zeroed(bytes: usize): usize {
  const p = heap.alloc(bytes);
  memory.fill(p, 0, bytes);
  return p;
}

function planeOf(n: i32): usize {
  return zeroed((<usize>n) << 2);
}

// ---------------------------------------------------------------------------------------------
// Cube root, for arguments in [BIAS, 1 + BIAS]: a bit-level first guess (within 4 %), then two
// Halley steps (error cubed each time: far under the float's rounding). The scalar and the vector
// form do the same operations, so a pixel gets the same value whichever handles it.

const THIRD: f32 = <f32>(1.0 / 3.0);
const CBRT_MAGIC: i32 = 709921077;

function cbrt1(v: f32): f32 {
  let y = reinterpret<f32>(<i32>(<f32>reinterpret<i32>(v) * THIRD) + CBRT_MAGIC);
  let y3 = y * y * y;
  y = (y * (y3 + v + v)) / (y3 + y3 + v);
  y3 = y * y * y;
  return (y * (y3 + v + v)) / (y3 + y3 + v);
}

function cbrt4(v: v128): v128 {
  const third = f32x4.splat(THIRD);
  let y = i32x4.add(
    i32x4.trunc_sat_f32x4_s(f32x4.mul(f32x4.convert_i32x4_s(v), third)),
    i32x4.splat(CBRT_MAGIC),
  );
  let y3 = f32x4.mul(f32x4.mul(y, y), y);
  y = f32x4.div(f32x4.mul(y, f32x4.add(y3, f32x4.add(v, v))), f32x4.add(f32x4.add(y3, y3), v));
  y3 = f32x4.mul(f32x4.mul(y, y), y);
  return f32x4.div(f32x4.mul(y, f32x4.add(y3, f32x4.add(v, v))), f32x4.add(f32x4.add(y3, y3), v));
}

// ---------------------------------------------------------------------------------------------
// Linear RGB → XYB (the metric's scaled form), pixels [from, to) of one scale. `need`: bit 0 X,
// bit 1 Y, bit 2 B. Input either 8-bit sRGB (`bytes`: decoded through LUT) or three planes of
// linear floats laid end to end (`n` floats apart).

function lut(code: u32): f32 {
  return load<f32>(LUT + ((<usize>code) << 2));
}

function xybScalar(lr: f32, lg: f32, lb: f32, i: usize, ox: usize, oy: usize, ob: usize, need: i32): void {
  const m0 = cbrt1(M00 * lr + M01 * lg + M02 * lb + BIAS) - CBRT_BIAS;
  const m1 = cbrt1(M10 * lr + M11 * lg + M12 * lb + BIAS) - CBRT_BIAS;
  const y: f32 = 0.5 * (m0 + m1);
  const o = i << 2;
  if (need & 1) store<f32>(ox + o, <f32>0.5 * (m0 - m1) * <f32>14 + <f32>0.42);
  if (need & 2) store<f32>(oy + o, y + <f32>0.01);
  if (need & 4) store<f32>(ob + o, cbrt1(M20 * lr + M21 * lg + M22 * lb + BIAS) - CBRT_BIAS - y + <f32>0.55);
}

function mix(a: f32, b: f32, c: f32, r: v128, g: v128, bl: v128): v128 {
  return f32x4.add(
    f32x4.add(
      f32x4.add(f32x4.mul(f32x4.splat(a), r), f32x4.mul(f32x4.splat(b), g)),
      f32x4.mul(f32x4.splat(c), bl),
    ),
    f32x4.splat(BIAS),
  );
}

function xyb4(lr: v128, lg: v128, lb: v128, i: usize, ox: usize, oy: usize, ob: usize, need: i32): void {
  const cb = f32x4.splat(CBRT_BIAS);
  const half = f32x4.splat(0.5);
  const m0 = f32x4.sub(cbrt4(mix(M00, M01, M02, lr, lg, lb)), cb);
  const m1 = f32x4.sub(cbrt4(mix(M10, M11, M12, lr, lg, lb)), cb);
  const y = f32x4.mul(half, f32x4.add(m0, m1));
  const o = i << 2;
  if (need & 1)
    v128.store(
      ox + o,
      f32x4.add(f32x4.mul(f32x4.mul(half, f32x4.sub(m0, m1)), f32x4.splat(14)), f32x4.splat(0.42)),
    );
  if (need & 2) v128.store(oy + o, f32x4.add(y, f32x4.splat(0.01)));
  if (need & 4) {
    const m2 = f32x4.sub(cbrt4(mix(M20, M21, M22, lr, lg, lb)), cb);
    v128.store(ob + o, f32x4.add(f32x4.sub(m2, y), f32x4.splat(0.55)));
  }
}

function xybRangeBytes(d: usize, from: i32, to: i32, ox: usize, oy: usize, ob: usize, need: i32): void {
  let i = from;
  for (; i + 4 <= to; i += 4) {
    const p = d + <usize>i * 3;
    const lr = f32x4(lut(load<u8>(p)), lut(load<u8>(p, 3)), lut(load<u8>(p, 6)), lut(load<u8>(p, 9)));
    const lg = f32x4(lut(load<u8>(p, 1)), lut(load<u8>(p, 4)), lut(load<u8>(p, 7)), lut(load<u8>(p, 10)));
    const lb = f32x4(lut(load<u8>(p, 2)), lut(load<u8>(p, 5)), lut(load<u8>(p, 8)), lut(load<u8>(p, 11)));
    xyb4(lr, lg, lb, <usize>i, ox, oy, ob, need);
  }
  for (; i < to; i++) {
    const p = d + <usize>i * 3;
    xybScalar(lut(load<u8>(p)), lut(load<u8>(p, 1)), lut(load<u8>(p, 2)), <usize>i, ox, oy, ob, need);
  }
}

function xybRangePlanes(
  lin: usize,
  n: i32,
  from: i32,
  to: i32,
  ox: usize,
  oy: usize,
  ob: usize,
  need: i32,
): void {
  const r = lin;
  const g = lin + ((<usize>n) << 2);
  const b = g + ((<usize>n) << 2);
  let i = from;
  for (; i + 4 <= to; i += 4) {
    const o = (<usize>i) << 2;
    xyb4(v128.load(r + o), v128.load(g + o), v128.load(b + o), <usize>i, ox, oy, ob, need);
  }
  for (; i < to; i++) {
    const o = (<usize>i) << 2;
    xybScalar(load<f32>(r + o), load<f32>(g + o), load<f32>(b + o), <usize>i, ox, oy, ob, need);
  }
}

/** All rows, or (with a row mask) the rows the sampled scale reads. `xyb`: three planes end to end. */
function toXyb(lin: usize, bytes: bool, w: i32, h: i32, xyb: usize, need: i32, rows: usize): void {
  const n = w * h;
  const ox = xyb;
  const oy = xyb + ((<usize>n) << 2);
  const ob = oy + ((<usize>n) << 2);
  if (rows) {
    for (let y = 0; y < h; y++) {
      if (!load<u8>(rows + y)) continue;
      if (bytes) xybRangeBytes(lin, y * w, (y + 1) * w, ox, oy, ob, need);
      else xybRangePlanes(lin, n, y * w, (y + 1) * w, ox, oy, ob, need);
    }
    return;
  }
  if (bytes) xybRangeBytes(lin, 0, n, ox, oy, ob, need);
  else xybRangePlanes(lin, n, 0, n, ox, oy, ob, need);
}

// ---------------------------------------------------------------------------------------------
// 2×2 box average in linear light; an odd last row or column repeats the edge pixel. Out: three
// planes end to end (a new block).

function downsample(lin: usize, bytes: bool, w: i32, h: i32): usize {
  const w2 = (w + 1) >> 1;
  const h2 = (h + 1) >> 1;
  const n = w * h;
  const n2 = w2 * h2;
  const out = heap.alloc(<usize>n2 * 12);
  for (let c = 0; c < 3; c++) {
    const o = out + <usize>c * ((<usize>n2) << 2);
    const s = lin + <usize>c * ((<usize>n) << 2);
    for (let oy = 0; oy < h2; oy++) {
      const y0 = 2 * oy * w;
      const y1 = min(2 * oy + 1, h - 1) * w;
      const orow = o + ((<usize>(oy * w2)) << 2);
      for (let ox = 0; ox < w2; ox++) {
        const x0 = 2 * ox;
        const x1 = min(x0 + 1, w - 1);
        let v: f32;
        if (bytes) {
          v =
            lut(load<u8>(lin + <usize>((y0 + x0) * 3 + c))) +
            lut(load<u8>(lin + <usize>((y0 + x1) * 3 + c))) +
            lut(load<u8>(lin + <usize>((y1 + x0) * 3 + c))) +
            lut(load<u8>(lin + <usize>((y1 + x1) * 3 + c)));
        } else {
          v =
            load<f32>(s + ((<usize>(y0 + x0)) << 2)) +
            load<f32>(s + ((<usize>(y0 + x1)) << 2)) +
            load<f32>(s + ((<usize>(y1 + x0)) << 2)) +
            load<f32>(s + ((<usize>(y1 + x1)) << 2));
        }
        store<f32>(orow + ((<usize>ox) << 2), v * <f32>0.25);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The blur: horizontal pass row by row, vertical pass per output row; zero outside the image.

function tap(t: i32): f32 {
  const a = abs(t);
  return a === 0 ? K0 : a === 1 ? K1 : a === 2 ? K2 : a === 3 ? K3 : K4;
}

function edgeH(src: usize, width: i32, x: i32): f32 {
  let acc: f32 = 0;
  for (let t = -RADIUS; t <= RADIUS; t++) {
    const xx = x + t;
    if (xx >= 0 && xx < width) acc += tap(t) * load<f32>(src + ((<usize>xx) << 2));
  }
  return acc;
}

/** Horizontal pass over one row: `src` and `out` point at the row's first pixel. */
function blurRowH(src: usize, width: i32, out: usize): void {
  const edgeEnd = min(RADIUS, width);
  const innerEnd = width - RADIUS;
  for (let x = 0; x < edgeEnd; x++) store<f32>(out + ((<usize>x) << 2), edgeH(src, width, x));
  if (innerEnd > RADIUS) {
    const k0 = f32x4.splat(K0);
    const k1 = f32x4.splat(K1);
    const k2 = f32x4.splat(K2);
    const k3 = f32x4.splat(K3);
    const k4 = f32x4.splat(K4);
    let x = RADIUS;
    for (; x + 4 <= innerEnd; x += 4) {
      const p = src + ((<usize>x) << 2);
      const v = f32x4.add(
        f32x4.add(
          f32x4.add(
            f32x4.add(
              f32x4.mul(k0, v128.load(p)),
              f32x4.mul(k1, f32x4.add(v128.load(p - 4), v128.load(p + 4))),
            ),
            f32x4.mul(k2, f32x4.add(v128.load(p - 8), v128.load(p + 8))),
          ),
          f32x4.mul(k3, f32x4.add(v128.load(p - 12), v128.load(p + 12))),
        ),
        f32x4.mul(k4, f32x4.add(v128.load(p - 16), v128.load(p + 16))),
      );
      v128.store(out + ((<usize>x) << 2), v);
    }
    for (; x < innerEnd; x++) {
      const p = src + ((<usize>x) << 2);
      const v =
        K0 * load<f32>(p) +
        K1 * (load<f32>(p - 4) + load<f32>(p + 4)) +
        K2 * (load<f32>(p - 8) + load<f32>(p + 8)) +
        K3 * (load<f32>(p - 12) + load<f32>(p + 12)) +
        K4 * (load<f32>(p - 16) + load<f32>(p + 16));
      store<f32>(out + ((<usize>x) << 2), v);
    }
  }
  for (let x = max(innerEnd, edgeEnd); x < width; x++)
    store<f32>(out + ((<usize>x) << 2), edgeH(src, width, x));
}

/** Vertical pass for row `y` of `tmp` (a horizontally blurred plane) into the row at `out`. */
function blurColumnRow(tmp: usize, width: i32, height: i32, y: i32, out: usize): void {
  const stride = (<usize>width) << 2;
  const row = tmp + <usize>y * stride;
  if (y >= RADIUS && y + RADIUS < height) {
    const k0 = f32x4.splat(K0);
    const k1 = f32x4.splat(K1);
    const k2 = f32x4.splat(K2);
    const k3 = f32x4.splat(K3);
    const k4 = f32x4.splat(K4);
    let x = 0;
    for (; x + 4 <= width; x += 4) {
      const p = row + ((<usize>x) << 2);
      const v = f32x4.add(
        f32x4.add(
          f32x4.add(
            f32x4.add(
              f32x4.mul(k0, v128.load(p)),
              f32x4.mul(k1, f32x4.add(v128.load(p - stride), v128.load(p + stride))),
            ),
            f32x4.mul(k2, f32x4.add(v128.load(p - 2 * stride), v128.load(p + 2 * stride))),
          ),
          f32x4.mul(k3, f32x4.add(v128.load(p - 3 * stride), v128.load(p + 3 * stride))),
        ),
        f32x4.mul(k4, f32x4.add(v128.load(p - 4 * stride), v128.load(p + 4 * stride))),
      );
      v128.store(out + ((<usize>x) << 2), v);
    }
    for (; x < width; x++) {
      const p = row + ((<usize>x) << 2);
      const v =
        K0 * load<f32>(p) +
        K1 * (load<f32>(p - stride) + load<f32>(p + stride)) +
        K2 * (load<f32>(p - 2 * stride) + load<f32>(p + 2 * stride)) +
        K3 * (load<f32>(p - 3 * stride) + load<f32>(p + 3 * stride)) +
        K4 * (load<f32>(p - 4 * stride) + load<f32>(p + 4 * stride));
      store<f32>(out + ((<usize>x) << 2), v);
    }
    return;
  }
  const lo = max(0, y - RADIUS);
  const hi = min(height - 1, y + RADIUS);
  memory.fill(out, 0, stride);
  for (let yy = lo; yy <= hi; yy++) {
    const wt = tap(yy - y);
    const src = tmp + <usize>yy * stride;
    for (let x = 0; x < width; x++) {
      const o = out + ((<usize>x) << 2);
      store<f32>(o, load<f32>(o) + wt * load<f32>(src + ((<usize>x) << 2)));
    }
  }
}

function rowRead(rows: usize, y: i32): bool {
  return rows === 0 || load<u8>(rows + y) !== 0;
}

function rowKept(rows: usize, y: i32): bool {
  return rows === 0 || load<u8>(rows + y) === KEPT;
}

/** Blur of a whole plane (the rows a mask keeps) into `out`; `tmp` is scratch of the plane's size. */
function blur(src: usize, w: i32, h: i32, tmp: usize, out: usize, rows: usize): void {
  const stride = (<usize>w) << 2;
  for (let y = 0; y < h; y++)
    if (rowRead(rows, y)) blurRowH(src + <usize>y * stride, w, tmp + <usize>y * stride);
  for (let y = 0; y < h; y++) if (rowKept(rows, y)) blurColumnRow(tmp, w, h, y, out + <usize>y * stride);
}

/** Element-wise product of two rows into `out` (`n` floats). */
function product(a: usize, b: usize, n: i32, out: usize): void {
  let x = 0;
  for (; x + 4 <= n; x += 4) {
    const o = (<usize>x) << 2;
    v128.store(out + o, f32x4.mul(v128.load(a + o), v128.load(b + o)));
  }
  for (; x < n; x++) {
    const o = (<usize>x) << 2;
    store<f32>(out + o, load<f32>(a + o) * load<f32>(b + o));
  }
}

/** Blur of src·src; `row` is one row of scratch, `tmp` a plane. */
function blurSquare(src: usize, w: i32, h: i32, row: usize, tmp: usize, out: usize, rows: usize): void {
  const stride = (<usize>w) << 2;
  for (let y = 0; y < h; y++) {
    if (!rowRead(rows, y)) continue;
    const off = <usize>y * stride;
    product(src + off, src + off, w, row);
    blurRowH(row, w, tmp + off);
  }
  for (let y = 0; y < h; y++) if (rowKept(rows, y)) blurColumnRow(tmp, w, h, y, out + <usize>y * stride);
}

// ---------------------------------------------------------------------------------------------
// A prepared reference: one block of i32 fields. Per scale: width, height, row mask, the three
// XYB planes (one block), and per channel its blurred mean and blurred square (0 until made).

const REF_COUNT = 0;
const REF_SCALE = 4;
const SCALE_BYTES = 40;
const S_W = 0;
const S_H = 4;
const S_ROWS = 8;
const S_XYB = 12;
const S_MU = 16; // + 4c
const S_SIGMA = 28; // + 4c

function field(ref: usize, scale: i32, at: i32): usize {
  return ref + REF_SCALE + <usize>(scale * SCALE_BYTES + at);
}

function rowMask(h: i32, band: i32, every: i32, minHeight: i32): usize {
  if (band <= 0 || h < minHeight || every <= 1) return 0;
  const mask = zeroed(<usize>h);
  for (let y = 0; y < h; y++) {
    if ((y / band) % every !== 0) continue;
    store<u8>(mask + y, KEPT);
    for (let d = 1; d <= RADIUS; d++) {
      if (y - d >= 0 && !load<u8>(mask + y - d)) store<u8>(mask + y - d, 1);
      if (y + d < h && !load<u8>(mask + y + d)) store<u8>(mask + y + d, 1);
    }
  }
  return mask;
}

function planeAt(xyb: usize, n: i32, c: i32): usize {
  return xyb + <usize>c * ((<usize>n) << 2);
}

/**
 * Prepare a reference: `lin` is the full-size image (8-bit RGB when `bytes`, else three linear
 * planes), `wants` 6 × 3 bytes (scale × channel: bit 0 SSIM, bit 1 edge terms carry weight), the row
 * sampling (band 0: none). Returns the reference block; `releaseReference` frees it.
 */
export function prepare(
  lin: usize,
  bytes: bool,
  width: i32,
  height: i32,
  wants: usize,
  band: i32,
  every: i32,
  minHeight: i32,
): usize {
  const ref = zeroed(REF_SCALE + SCALES * SCALE_BYTES);
  let w = width;
  let h = height;
  const tmp = heap.alloc((<usize>(w * h)) << 2);
  const row = heap.alloc((<usize>w) << 2);
  let current = lin;
  let currentBytes = bytes;
  let count = 0;
  for (let scale = 0; scale < SCALES; scale++) {
    if (w < 8 || h < 8) break;
    if (scale > 0) {
      const next = downsample(current, currentBytes, w, h);
      if (current !== lin) heap.free(current);
      current = next;
      currentBytes = false;
      w = (w + 1) >> 1;
      h = (h + 1) >> 1;
    }
    const n = w * h;
    const xyb = planeOf(n * 3);
    const rows = rowMask(h, band, every, minHeight);
    toXyb(current, currentBytes, w, h, xyb, 7, rows);
    store<i32>(field(ref, scale, S_W), w);
    store<i32>(field(ref, scale, S_H), h);
    store<i32>(field(ref, scale, S_ROWS), <i32>rows);
    store<i32>(field(ref, scale, S_XYB), <i32>xyb);
    for (let c = 0; c < 3; c++) {
      const want = load<u8>(wants + scale * 3 + c);
      if (!want) continue;
      const mu = planeOf(n);
      blur(planeAt(xyb, n, c), w, h, tmp, mu, rows);
      store<i32>(field(ref, scale, S_MU + 4 * c), <i32>mu);
      if (want & 1) {
        const sigma = planeOf(n);
        blurSquare(planeAt(xyb, n, c), w, h, row, tmp, sigma, rows);
        store<i32>(field(ref, scale, S_SIGMA + 4 * c), <i32>sigma);
      }
    }
    count++;
  }
  if (current !== lin) heap.free(current);
  heap.free(tmp);
  heap.free(row);
  store<i32>(ref + REF_COUNT, count);
  return ref;
}

export function scaleCountOf(ref: usize): i32 {
  return load<i32>(ref + REF_COUNT);
}

export function releaseReference(ref: usize): void {
  const count = load<i32>(ref + REF_COUNT);
  for (let scale = 0; scale < count; scale++) {
    heap.free(<usize>load<i32>(field(ref, scale, S_XYB)));
    const rows = <usize>load<i32>(field(ref, scale, S_ROWS));
    if (rows) heap.free(rows);
    for (let c = 0; c < 3; c++) {
      const mu = <usize>load<i32>(field(ref, scale, S_MU + 4 * c));
      if (mu) heap.free(mu);
      const sigma = <usize>load<i32>(field(ref, scale, S_SIGMA + 4 * c));
      if (sigma) heap.free(sigma);
    }
  }
  heap.free(ref);
}

/** The blurred mean of channel c at a scale, made on first use (`tmp`: scratch plane). */
function muOf(ref: usize, scale: i32, c: i32, tmp: usize): usize {
  const at = field(ref, scale, S_MU + 4 * c);
  let mu = <usize>load<i32>(at);
  if (!mu) {
    const w = load<i32>(field(ref, scale, S_W));
    const h = load<i32>(field(ref, scale, S_H));
    const xyb = <usize>load<i32>(field(ref, scale, S_XYB));
    mu = planeOf(w * h);
    blur(planeAt(xyb, w * h, c), w, h, tmp, mu, <usize>load<i32>(field(ref, scale, S_ROWS)));
    store<i32>(at, <i32>mu);
  }
  return mu;
}

/** The blurred square of channel c at a scale, made on first use. */
function sigmaOf(ref: usize, scale: i32, c: i32, row: usize, tmp: usize): usize {
  const at = field(ref, scale, S_SIGMA + 4 * c);
  let sigma = <usize>load<i32>(at);
  if (!sigma) {
    const w = load<i32>(field(ref, scale, S_W));
    const h = load<i32>(field(ref, scale, S_H));
    const xyb = <usize>load<i32>(field(ref, scale, S_XYB));
    sigma = planeOf(w * h);
    blurSquare(planeAt(xyb, w * h, c), w, h, row, tmp, sigma, <usize>load<i32>(field(ref, scale, S_ROWS)));
    store<i32>(at, <i32>sigma);
  }
  return sigma;
}

function hsum(v: v128): f64 {
  return (
    <f64>f32x4.extract_lane(v, 0) +
    <f64>f32x4.extract_lane(v, 1) +
    <f64>f32x4.extract_lane(v, 2) +
    <f64>f32x4.extract_lane(v, 3)
  );
}

// Per-row sums of the maps (the norms' raw material), added up in doubles row by row.
let sSsim1: f64 = 0;
let sSsim4: f64 = 0;
let sArt1: f64 = 0;
let sArt4: f64 = 0;
let sDet1: f64 = 0;
let sDet4: f64 = 0;

/** SSIM and edge sums of one row (all pointers at the row's first pixel). */
function sumsRow(
  a: usize,
  b: usize,
  mu1: usize,
  mu2: usize,
  s11: usize,
  s22: usize,
  s12: usize,
  width: i32,
  ssim: bool,
): void {
  const zero = f32x4.splat(0);
  const one = f32x4.splat(1);
  const c2 = f32x4.splat(C2);
  const two = f32x4.splat(2);
  let ssim1 = zero;
  let ssim4 = zero;
  let art1 = zero;
  let art4 = zero;
  let det1 = zero;
  let det4 = zero;
  let x = 0;
  for (; x + 4 <= width; x += 4) {
    const o = (<usize>x) << 2;
    const m1 = v128.load(mu1 + o);
    const m2 = v128.load(mu2 + o);
    if (ssim) {
      const dm = f32x4.sub(m1, m2);
      const numM = f32x4.sub(one, f32x4.mul(dm, dm));
      const numS = f32x4.add(f32x4.mul(two, f32x4.sub(v128.load(s12 + o), f32x4.mul(m1, m2))), c2);
      const denS = f32x4.add(
        f32x4.add(
          f32x4.sub(v128.load(s11 + o), f32x4.mul(m1, m1)),
          f32x4.sub(v128.load(s22 + o), f32x4.mul(m2, m2)),
        ),
        c2,
      );
      const d = f32x4.pmax(zero, f32x4.sub(one, f32x4.div(f32x4.mul(numM, numS), denS)));
      ssim1 = f32x4.add(ssim1, d);
      const d2 = f32x4.mul(d, d);
      ssim4 = f32x4.add(ssim4, f32x4.mul(d2, d2));
    }
    const e = f32x4.sub(
      f32x4.div(
        f32x4.add(one, f32x4.abs(f32x4.sub(v128.load(b + o), m2))),
        f32x4.add(one, f32x4.abs(f32x4.sub(v128.load(a + o), m1))),
      ),
      one,
    );
    const ep = f32x4.pmax(zero, e);
    const en = f32x4.pmax(zero, f32x4.neg(e));
    art1 = f32x4.add(art1, ep);
    const ep2 = f32x4.mul(ep, ep);
    art4 = f32x4.add(art4, f32x4.mul(ep2, ep2));
    det1 = f32x4.add(det1, en);
    const en2 = f32x4.mul(en, en);
    det4 = f32x4.add(det4, f32x4.mul(en2, en2));
  }
  let tSsim1 = hsum(ssim1);
  let tSsim4 = hsum(ssim4);
  let tArt1 = hsum(art1);
  let tArt4 = hsum(art4);
  let tDet1 = hsum(det1);
  let tDet4 = hsum(det4);
  for (; x < width; x++) {
    const o = (<usize>x) << 2;
    const m1 = load<f32>(mu1 + o);
    const m2 = load<f32>(mu2 + o);
    if (ssim) {
      const dm = m1 - m2;
      const numM: f32 = <f32>1 - dm * dm;
      const numS: f32 = <f32>2 * (load<f32>(s12 + o) - m1 * m2) + C2;
      const denS: f32 = load<f32>(s11 + o) - m1 * m1 + (load<f32>(s22 + o) - m2 * m2) + C2;
      const d: f32 = <f32>1 - (numM * numS) / denS;
      if (d > 0) {
        tSsim1 += d;
        const d2 = d * d;
        tSsim4 += d2 * d2;
      }
    }
    const e: f32 = (<f32>1 + abs(load<f32>(b + o) - m2)) / (<f32>1 + abs(load<f32>(a + o) - m1)) - <f32>1;
    if (e > 0) {
      tArt1 += e;
      const e2 = e * e;
      tArt4 += e2 * e2;
    } else if (e < 0) {
      tDet1 -= e;
      const e2 = e * e;
      tDet4 += e2 * e2;
    }
  }
  sSsim1 += tSsim1;
  sSsim4 += tSsim4;
  sArt1 += tArt1;
  sArt4 += tArt4;
  sDet1 += tDet1;
  sDet4 += tDet4;
}

/**
 * The sub-scores of a distorted image (`lin`, as for `prepare`) against a prepared reference, as
 * [scale][c*2+norm] SSIM norms (36 doubles) then [scale][c*4+k] edge norms (72 doubles) at `out`.
 * `wants` as for `prepare` (what to compute; 3 = everything).
 */
export function score(
  ref: usize,
  lin: usize,
  bytes: bool,
  width: i32,
  height: i32,
  wants: usize,
  out: usize,
): void {
  memory.fill(out, 0, 108 * 8);
  const count = load<i32>(ref + REF_COUNT);
  const n0 = width * height;
  const xyb2 = planeOf(n0 * 3);
  const row = heap.alloc((<usize>width) << 2);
  const tb = heap.alloc((<usize>n0) << 2);
  const tbb = heap.alloc((<usize>n0) << 2);
  const tab = heap.alloc((<usize>n0) << 2);
  const mu2 = heap.alloc((<usize>width) << 2);
  const s22 = heap.alloc((<usize>width) << 2);
  const s12 = heap.alloc((<usize>width) << 2);
  let w = width;
  let h = height;
  let current = lin;
  let currentBytes = bytes;
  for (let scale = 0; scale < count; scale++) {
    if (scale > 0) {
      const next = downsample(current, currentBytes, w, h);
      if (current !== lin) heap.free(current);
      current = next;
      currentBytes = false;
      w = (w + 1) >> 1;
      h = (h + 1) >> 1;
    }
    const n = w * h;
    const rows = <usize>load<i32>(field(ref, scale, S_ROWS));
    let need = 0;
    for (let c = 0; c < 3; c++) if (load<u8>(wants + scale * 3 + c)) need |= 1 << c;
    // The distorted planes of this scale, packed at n floats apart in xyb2.
    toXyb(current, currentBytes, w, h, xyb2, need, rows);
    let kept = n;
    if (rows) {
      kept = 0;
      for (let y = 0; y < h; y++) if (load<u8>(rows + y) === KEPT) kept += w;
    }
    const inv: f64 = 1.0 / <f64>kept;
    const stride = (<usize>w) << 2;
    const refXyb = <usize>load<i32>(field(ref, scale, S_XYB));
    for (let c = 0; c < 3; c++) {
      const want = load<u8>(wants + scale * 3 + c);
      if (!want) continue;
      const a = planeAt(refXyb, n, c);
      const b = planeAt(xyb2, n, c);
      const mu1 = muOf(ref, scale, c, tb);
      const ssim = (want & 1) !== 0;
      const s11 = ssim ? sigmaOf(ref, scale, c, row, tbb) : 0;
      for (let y = 0; y < h; y++) {
        if (!rowRead(rows, y)) continue;
        const off = <usize>y * stride;
        blurRowH(b + off, w, tb + off);
        if (ssim) {
          product(b + off, b + off, w, row);
          blurRowH(row, w, tbb + off);
          product(a + off, b + off, w, row);
          blurRowH(row, w, tab + off);
        }
      }
      sSsim1 = 0;
      sSsim4 = 0;
      sArt1 = 0;
      sArt4 = 0;
      sDet1 = 0;
      sDet4 = 0;
      for (let y = 0; y < h; y++) {
        if (!rowKept(rows, y)) continue;
        blurColumnRow(tb, w, h, y, mu2);
        if (ssim) {
          blurColumnRow(tbb, w, h, y, s22);
          blurColumnRow(tab, w, h, y, s12);
        }
        const off = <usize>y * stride;
        sumsRow(a + off, b + off, mu1 + off, mu2, s11 + off, s22, s12, w, ssim);
      }
      if (ssim) {
        store<f64>(out + <usize>(scale * 6 + c * 2) * 8, sSsim1 * inv);
        store<f64>(out + <usize>(scale * 6 + c * 2 + 1) * 8, Math.sqrt(Math.sqrt(sSsim4 * inv)));
      }
      const e = out + 36 * 8 + <usize>(scale * 12 + c * 4) * 8;
      store<f64>(e, sArt1 * inv);
      store<f64>(e, Math.sqrt(Math.sqrt(sArt4 * inv)), 8);
      store<f64>(e, sDet1 * inv, 16);
      store<f64>(e, Math.sqrt(Math.sqrt(sDet4 * inv)), 24);
    }
  }
  if (current !== lin) heap.free(current);
  heap.free(xyb2);
  heap.free(row);
  heap.free(tb);
  heap.free(tbb);
  heap.free(tab);
  heap.free(mu2);
  heap.free(s22);
  heap.free(s12);
}

/** How many scales of a prepared reference are row-sampled (for tests). */
export function sampledScalesOf(ref: usize): i32 {
  const count = load<i32>(ref + REF_COUNT);
  let sampled = 0;
  for (let scale = 0; scale < count; scale++) if (load<i32>(field(ref, scale, S_ROWS))) sampled++;
  return sampled;
}
