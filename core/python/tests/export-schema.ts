// Prints what @compresso/schema exports for other languages, as one JSON document on stdout:
// the JSON Schemas (as the OpenAPI components use them) and the tables they are built from.
import {
  DEFAULT_QUALITY,
  ERROR_STATUS,
  FILE_EXTENSIONS,
  INPUT_FORMATS,
  MAX_DIMENSION_LIMIT,
  OUTPUT_FORMATS,
  openApiComponents,
} from '@compresso/schema';

process.stdout.write(
  JSON.stringify({
    components: openApiComponents().schemas,
    tables: {
      ERROR_STATUS,
      OUTPUT_FORMATS,
      INPUT_FORMATS,
      FILE_EXTENSIONS,
      DEFAULT_QUALITY,
      MAX_DIMENSION_LIMIT,
    },
  }),
);
