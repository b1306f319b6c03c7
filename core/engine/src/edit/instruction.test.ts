import { EditOperationSchema } from '@compresso/schema';
import { describe, expect, it } from 'vitest';
import { normalizeInstruction, type ParsedInstruction, parseInstruction } from './instruction.ts';

type Row = [instruction: string, expected: Partial<ParsedInstruction>];

/** Instructions sharp can carry out: the exact operations, in order, and nothing left over. */
const UNDERSTOOD: Row[] = [
  [
    'make it 800 wide and black and white',
    { operations: [{ op: 'resize', width: 800 }, { op: 'grayscale' }] },
  ],
  [
    'rotate left and convert to webp',
    {
      operations: [
        { op: 'rotate', degrees: 270 },
        { op: 'format', format: 'webp' },
      ],
    },
  ],
  ['crop to square', { operations: [{ op: 'crop', aspect: '1:1' }] }],
  ['resize to 800 wide', { operations: [{ op: 'resize', width: 800 }] }],
  ['Resize it to 1200px wide.', { operations: [{ op: 'resize', width: 1200 }] }],
  ['width 640', { operations: [{ op: 'resize', width: 640 }] }],
  ['set the width to 300 pixels', { operations: [{ op: 'resize', width: 300 }] }],
  ['make it 600 tall', { operations: [{ op: 'resize', height: 600 }] }],
  ['height: 480px', { operations: [{ op: 'resize', height: 480 }] }],
  ['resize to 800x600', { operations: [{ op: 'resize', width: 800, height: 600 }] }],
  ['scale to 1024 by 768 pixels', { operations: [{ op: 'resize', width: 1024, height: 768 }] }],
  ['fit within 500 px', { operations: [{ op: 'resize', width: 500, height: 500 }] }],
  ['no bigger than 2000 pixels', { operations: [{ op: 'resize', width: 2000, height: 2000 }] }],
  ['resize to 50%', { operations: [{ op: 'resize', scale: 0.5 }] }],
  ['scale it down to 25%', { operations: [{ op: 'resize', scale: 0.25 }] }],
  ['make it 30% smaller', { operations: [{ op: 'resize', scale: 0.7 }] }],
  ['shrink it by 40%', { operations: [{ op: 'resize', scale: 0.6 }] }],
  ['half the size', { operations: [{ op: 'resize', scale: 0.5 }] }],
  ['double the size', { operations: [{ op: 'resize', scale: 2 }] }],
  ['crop to 16:9', { operations: [{ op: 'crop', aspect: '16:9' }] }],
  ['crop it to 4/3', { operations: [{ op: 'crop', aspect: '4:3' }] }],
  ['crop to a 3x2 aspect ratio', { operations: [{ op: 'crop', aspect: '3:2' }] }],
  ['make it square', { operations: [{ op: 'crop', aspect: '1:1' }] }],
  ['crop to widescreen', { operations: [{ op: 'crop', aspect: '16:9' }] }],
  ['crop as portrait', { operations: [{ op: 'crop', aspect: '4:5' }] }],
  ['rotate right', { operations: [{ op: 'rotate', degrees: 90 }] }],
  ['rotate 90 degrees', { operations: [{ op: 'rotate', degrees: 90 }] }],
  ['rotate it 90° counterclockwise', { operations: [{ op: 'rotate', degrees: 270 }] }],
  ['turn it to the left', { operations: [{ op: 'rotate', degrees: 270 }] }],
  ['rotate by 45 degrees', { operations: [{ op: 'rotate', degrees: 45 }] }],
  ['rotate -90', { operations: [{ op: 'rotate', degrees: 270 }] }],
  ['turn it upside down', { operations: [{ op: 'rotate', degrees: 180 }] }],
  ['rotate 180', { operations: [{ op: 'rotate', degrees: 180 }] }],
  ['flip horizontally', { operations: [{ op: 'flip', direction: 'horizontal' }] }],
  ['flip it vertically', { operations: [{ op: 'flip', direction: 'vertical' }] }],
  ['mirror the image', { operations: [{ op: 'flip', direction: 'horizontal' }] }],
  ['black & white', { operations: [{ op: 'grayscale' }] }],
  ['convert to grayscale', { operations: [{ op: 'grayscale' }] }],
  ['greyscale please', { operations: [{ op: 'grayscale' }] }],
  ['B&W', { operations: [{ op: 'grayscale' }] }],
  ['monochrome', { operations: [{ op: 'grayscale' }] }],
  ['remove the colour', { operations: [{ op: 'grayscale' }] }],
  ['blur it', { operations: [{ op: 'blur', sigma: 3 }] }],
  ['blur slightly', { operations: [{ op: 'blur', sigma: 1.5 }] }],
  ['add a strong blur', { operations: [{ op: 'blur', sigma: 8 }] }],
  ['blur by 5', { operations: [{ op: 'blur', sigma: 5 }] }],
  ['make it blurry', { operations: [{ op: 'blur', sigma: 3 }] }],
  ['sharpen', { operations: [{ op: 'sharpen', sigma: 1 }] }],
  ['sharpen it a little', { operations: [{ op: 'sharpen', sigma: 0.5 }] }],
  ['make it crisper', { operations: [{ op: 'sharpen', sigma: 1 }] }],
  ['brighter', { operations: [{ op: 'brightness', factor: 1.2 }] }],
  ['a bit brighter', { operations: [{ op: 'brightness', factor: 1.1 }] }],
  ['make it much darker', { operations: [{ op: 'brightness', factor: 0.6 }] }],
  ['brighten it by 30%', { operations: [{ op: 'brightness', factor: 1.3 }] }],
  ['increase the brightness', { operations: [{ op: 'brightness', factor: 1.2 }] }],
  ['brightness 120%', { operations: [{ op: 'brightness', factor: 1.2 }] }],
  ['more contrast', { operations: [{ op: 'contrast', factor: 1.2 }] }],
  ['less contrast', { operations: [{ op: 'contrast', factor: 0.8 }] }],
  ['boost the contrast by 50%', { operations: [{ op: 'contrast', factor: 1.5 }] }],
  ['add some contrast', { operations: [{ op: 'contrast', factor: 1.2 }] }],
  ['more vivid', { operations: [{ op: 'saturation', factor: 1.2 }] }],
  ['less saturated', { operations: [{ op: 'saturation', factor: 0.8 }] }],
  ['convert to webp', { operations: [{ op: 'format', format: 'webp' }] }],
  ['save as a PNG', { operations: [{ op: 'format', format: 'png' }] }],
  ['make it a jpg', { operations: [{ op: 'format', format: 'jpeg' }] }],
  ['as avif', { operations: [{ op: 'format', format: 'avif' }] }],
  ['quality 60', { operations: [{ op: 'quality', quality: 60 }] }],
  ['at 75% quality', { operations: [{ op: 'quality', quality: 75 }] }],
  ['high quality', { operations: [{ op: 'quality', quality: 90 }] }],
  ['smaller file size', { operations: [{ op: 'quality', quality: 'auto' }] }],
  [
    'Resize to 1024 wide, then sharpen slightly and export as WebP at quality 70',
    {
      operations: [
        { op: 'resize', width: 1024 },
        { op: 'sharpen', sigma: 0.5 },
        { op: 'format', format: 'webp' },
        { op: 'quality', quality: 70 },
      ],
    },
  ],
  [
    'flip horizontally, rotate right and make it black and white',
    {
      operations: [
        { op: 'flip', direction: 'horizontal' },
        { op: 'rotate', degrees: 90 },
        { op: 'grayscale' },
      ],
    },
  ],
  [
    'crop to square then 400 wide then png',
    {
      operations: [
        { op: 'crop', aspect: '1:1' },
        { op: 'resize', width: 400 },
        { op: 'format', format: 'png' },
      ],
    },
  ],
];

/** Instructions that name content: only a generative model could do them. */
const GENERATIVE: Row[] = [
  ['blur the background', { operations: [], generative: ['blur the background'] }],
  ['remove the background', { operations: [], generative: ['remove the background'] }],
  ['remove the person on the left', { operations: [], generative: ['remove the person on the left'] }],
  ['add a hat to the dog', { operations: [], generative: ['add a hat to the dog'] }],
  ['replace the sky with a sunset', { operations: [], generative: ['replace the sky with a sunset'] }],
  [
    'make it look like a watercolor painting',
    { operations: [], generative: ['make it look like a watercolor painting'] },
  ],
  ['blur the faces', { operations: [], generative: ['blur the faces'] }],
  [
    'remove the background and convert to png',
    { operations: [{ op: 'format', format: 'png' }], generative: ['remove the background'] },
  ],
  ['get rid of the watermark', { operations: [], generative: ['get rid of the watermark'] }],
  ['upscale', { operations: [], generative: ['upscale'] }],
];

/** Instructions it must refuse or report: nothing understood, values out of range, contradictions. */
const REFUSED: Row[] = [
  ['make it pop', { operations: [], unrecognized: ['pop'] }],
  ['asdf qwerty', { operations: [], unrecognized: ['asdf', 'qwerty'] }],
  ['rotate', { operations: [], unrecognized: ['rotate'] }],
  ['crop', { operations: [], unrecognized: ['crop'] }],
  ['resize', { operations: [], unrecognized: ['resize'] }],
  ['make it 800 wide and groovy', { operations: [{ op: 'resize', width: 800 }], unrecognized: ['groovy'] }],
  [
    'resize to 0 wide',
    { operations: [], problems: [{ phrase: 'resize to 0 wide', message: expect.stringContaining('width') }] },
  ],
  [
    'make it 99999999 wide',
    { operations: [], problems: [{ phrase: 'make it 99999999 wide', message: expect.any(String) }] },
  ],
  [
    'quality 0',
    { operations: [], problems: [{ phrase: 'quality 0', message: expect.stringContaining('quality') }] },
  ],
  ['quality 150', { operations: [], problems: [{ phrase: 'quality 150', message: expect.any(String) }] }],
  [
    'rotate 400 degrees',
    { operations: [], problems: [{ phrase: 'rotate 400 degrees', message: expect.any(String) }] },
  ],
  ['rotate 360', { operations: [], problems: [{ phrase: 'rotate 360', message: expect.any(String) }] }],
  [
    'convert to heic',
    { operations: [], problems: [{ phrase: 'convert to heic', message: expect.stringContaining('HEIC') }] },
  ],
  ['save as tiff', { operations: [], problems: [{ phrase: 'save as tiff', message: expect.any(String) }] }],
  [
    'convert to svg',
    { operations: [], problems: [{ phrase: 'convert to svg', message: expect.any(String) }] },
  ],
  ['blur by 500', { operations: [], problems: [{ phrase: 'blur by 500', message: expect.any(String) }] }],
  ['crop to 0:1', { operations: [], problems: [{ phrase: 'crop to 0:1', message: expect.any(String) }] }],
  ['crop to 50:1', { operations: [], problems: [{ phrase: 'crop to 50:1', message: expect.any(String) }] }],
  [
    'brighten it by 500%',
    { operations: [], problems: [{ phrase: 'brighten it by 500%', message: expect.any(String) }] },
  ],
  [
    'convert to webp and convert to png',
    {
      operations: [
        { op: 'format', format: 'webp' },
        { op: 'format', format: 'png' },
      ],
      problems: [{ phrase: 'webp and png', message: expect.stringContaining('more than one format') }],
    },
  ],
  [
    'quality 50 and quality 90',
    {
      operations: [
        { op: 'quality', quality: 50 },
        { op: 'quality', quality: 90 },
      ],
      problems: [{ phrase: '50 and 90', message: expect.stringContaining('more than one quality') }],
    },
  ],
  ['', { operations: [], unrecognized: [], generative: [] }],
  ['and the please', { operations: [], unrecognized: [] }],
];

function check(instruction: string, expected: Partial<ParsedInstruction>) {
  const parsed = parseInstruction(instruction);
  expect(parsed).toEqual({
    operations: [],
    generative: [],
    unrecognized: [],
    problems: [],
    ...expected,
  });
  for (const op of parsed.operations)
    expect(EditOperationSchema.safeParse(op).success, JSON.stringify(op)).toBe(true);
}

describe('parseInstruction', () => {
  it('has a table of at least 60 phrasings', () => {
    expect(UNDERSTOOD.length + GENERATIVE.length + REFUSED.length).toBeGreaterThanOrEqual(60);
  });
  it.each(UNDERSTOOD)('understands %j', check);
  it.each(GENERATIVE)('sends %j to a generative model', check);
  it.each(REFUSED)('refuses or reports %j', check);

  it('is deterministic and pure: the same words give the same answer, whatever came before', () => {
    const first = parseInstruction('rotate left and convert to webp');
    parseInstruction('blur the background');
    expect(parseInstruction('rotate left and convert to webp')).toEqual(first);
  });

  it('normalizes case, quotes, punctuation and degree signs, keeping ratios and decimals whole', () => {
    expect(normalizeInstruction('  Crop to 16:9, Rotate 90°;  blur 1.5. ')).toBe(
      'crop to 16:9 , rotate 90 degrees ; blur 1.5 .',
    );
  });
});
