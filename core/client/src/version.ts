/** Sent in the User-Agent; `version.test.ts` keeps it equal to package.json's version. */
export const VERSION = '0.1.0';
