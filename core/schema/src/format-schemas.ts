import { z } from 'zod';
import { INPUT_FORMATS, OUTPUT_FORMATS } from './formats.ts';

export const OutputFormatSchema = z.enum(OUTPUT_FORMATS);
export const InputFormatSchema = z.enum(INPUT_FORMATS);
