// Debian's Chromium for the real-VS-Code tests (harness.mjs, exthost.mjs): headless, offline-quiet, with its
// profile, HOME and XDG dirs inside `profile` so nothing lands under the user's home.
import { chromium } from 'playwright-core';

export function launchChromium(profile) {
  return chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    env: { ...process.env, HOME: profile, XDG_CONFIG_HOME: `${profile}/.config`, XDG_CACHE_HOME: `${profile}/.cache` },
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
}
