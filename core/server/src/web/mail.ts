import type { Config, Logger } from '@compresso/runtime';
import nodemailer from 'nodemailer';

/** What the reset flow needs from mail: one message to one address. */
export interface Mailer {
  send(message: { to: string; subject: string; text: string }): Promise<void>;
}

/**
 * Mail through SMTP_URL when configured (nodemailer: TLS, AUTH and the SMTP dialogue are a solved
 * problem, not ours to write); undefined otherwise, and the caller logs the link instead.
 */
export function createMailer(config: Config, logger: Logger): Mailer | undefined {
  if (!config.smtpUrl) return undefined;
  const transport = nodemailer.createTransport(config.smtpUrl);
  return {
    async send(message) {
      const info = await transport.sendMail({ from: config.mailFrom, ...message });
      // The message id only: the body holds a secret link, the address is personal data.
      logger.info({ message_id: info.messageId }, 'mail sent');
    },
  };
}
