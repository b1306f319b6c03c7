/** Reported to MCP clients in the handshake; a test keeps it equal to package.json's version. */
export const VERSION = '0.1.0';
