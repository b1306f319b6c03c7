/**
 * Media → Compresso bulk: the bulk optimizer's screen. Built by @wordpress/scripts into
 * plugin/build/bulk.js; React, @wordpress/components and @wordpress/api-fetch come from WordPress
 * itself (the build lists them in bulk.asset.php). No JSX, so the bundle does not need the
 * react-jsx-runtime script (WordPress 6.6+) and runs on every WordPress the plugin supports (6.2+).
 */
import apiFetch from '@wordpress/api-fetch';
import { Button, Card, CardBody, CardHeader, Notice, Spinner } from '@wordpress/components';
import {
  createRoot,
  createElement as h,
  render,
  useCallback,
  useEffect,
  useRef,
  useState,
} from '@wordpress/element';
import { __, _n, sprintf } from '@wordpress/i18n';

const settings = window.compressoBulk || { canManage: false, connected: false, settingsUrl: '' };

const ACTIVE = ['running', 'waiting'];

function bytes(n) {
  if (!n) return '0 B';
  const units = ['B', 'KB', 'MB', 'GB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function clock(unix) {
  if (!unix) return '';
  return new Date(unix * 1000).toLocaleString(undefined, {
    weekday: 'short',
    hour: '2-digit',
    minute: '2-digit',
  });
}

function statusText(run) {
  switch (run.status) {
    case 'running':
      return __('Optimizing in the background. You can close this page: the run goes on.', 'compresso');
    case 'waiting':
      return run.wait_reason === 'QUOTA_EXCEEDED'
        ? sprintf(
            /* translators: %s: date and time */
            __(
              "Today's quota of API requests is used up. The run stopped cleanly and goes on by itself after the quota resets (%s). Nothing is lost.",
              'compresso',
            ),
            clock(run.resume_at),
          )
        : sprintf(
            /* translators: %s: time */
            __('The server asked to slow down; the run goes on by itself at %s.', 'compresso'),
            clock(run.resume_at),
          );
    case 'paused':
      return __('Paused. Resume when you like: images already done stay done.', 'compresso');
    case 'cancelled':
      return __('Cancelled. Images already optimized stay optimized; a new run skips them.', 'compresso');
    case 'done':
      return __('Finished.', 'compresso');
    default:
      return __('No bulk optimization has run yet.', 'compresso');
  }
}

function Cost({ stats }) {
  if (!stats) return h(Spinner);
  const quota = stats.quota || {};
  let duration;
  if (!stats.requests_for_library) {
    duration = __('Every image is already optimized: a run would send nothing.', 'compresso');
  } else if (stats.extra_days_for_library === null) {
    duration = __('Connect a server to see how long it takes at your plan’s quota.', 'compresso');
  } else if (stats.extra_days_for_library === 0) {
    duration = __('That fits in what is left of today’s quota.', 'compresso');
  } else {
    duration = sprintf(
      /* translators: 1: days, 2: daily quota */
      _n(
        'At your plan’s %2$d requests a day, that takes %1$d more day after today.',
        'At your plan’s %2$d requests a day, that takes %1$d more days after today.',
        stats.extra_days_for_library,
        'compresso',
      ),
      stats.extra_days_for_library,
      quota.limit,
    );
  }
  const formats = stats.formats.length ? stats.formats.join(' + ').toUpperCase() : '';
  return h(
    'div',
    { className: 'compresso-bulk-cost' },
    h(
      'p',
      null,
      sprintf(
        /* translators: 1: requests, 2: sizes, 3: formats */
        __(
          'One upload costs up to %1$d API requests: the original and its %2$d generated sizes (WordPress makes only those smaller than the upload), each compressed%3$s.',
          'compresso',
        ),
        stats.requests_per_upload,
        stats.sizes.length,
        formats ? sprintf(/* translators: %s: formats */ __(' and made as %s', 'compresso'), formats) : '',
      ),
    ),
    h(
      'p',
      null,
      sprintf(
        /* translators: 1: images, 2: optimized, 3: to do, 4: requests */
        __(
          'Your library: %1$d images, %2$d optimized, %3$d to do, which needs %4$d API requests.',
          'compresso',
        ),
        stats.images,
        stats.optimized,
        stats.pending,
        stats.requests_for_library,
      ),
      ' ',
      duration,
    ),
  );
}

function Quota({ quota }) {
  if (!quota || quota.limit === null || quota.limit === undefined) return null;
  return h(
    'p',
    { className: 'compresso-bulk-quota' },
    sprintf(
      /* translators: 1: remaining, 2: limit */
      __('Quota left today: %1$s of %2$d requests.', 'compresso'),
      quota.remaining === null ? '?' : String(quota.remaining),
      quota.limit,
    ),
    quota.reset_at
      ? ` ${sprintf(/* translators: %s: time */ __('It resets %s.', 'compresso'), clock(quota.reset_at))}`
      : '',
  );
}

function Progress({ run }) {
  const saved = run.bytes_before - run.bytes_after;
  return h(
    'div',
    null,
    h('progress', {
      max: Math.max(1, run.total),
      value: run.processed,
      style: { width: '100%', height: '1.5em' },
      'aria-label': __('Bulk optimization progress', 'compresso'),
    }),
    h(
      'p',
      { 'aria-live': 'polite' },
      sprintf(
        /* translators: 1: done, 2: total, 3: percent */
        __('%1$d of %2$d images (%3$d%%).', 'compresso'),
        run.processed,
        run.total,
        run.percent,
      ),
      ' ',
      sprintf(
        /* translators: 1: optimized, 2: skipped, 3: failed, 4: bytes saved, 5: requests */
        __(
          '%1$d optimized, %2$d already optimized, %3$d failed; %4$s saved with %5$d API requests.',
          'compresso',
        ),
        run.optimized,
        run.skipped,
        run.failed.length,
        bytes(saved),
        run.requests,
      ),
    ),
  );
}

function Errors({ run, act, busy }) {
  if (!run.failed.length) return null;
  return h(
    Card,
    { className: 'compresso-bulk-errors' },
    h(CardHeader, null, h('h2', null, __('Images that could not be optimized', 'compresso'))),
    h(
      CardBody,
      null,
      h(
        'table',
        { className: 'widefat striped' },
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            h('th', null, __('Image', 'compresso')),
            h('th', null, __('What happened', 'compresso')),
            h('th', null, __('Attempts', 'compresso')),
            h('th', null, ''),
          ),
        ),
        h(
          'tbody',
          null,
          run.failed.map((f) =>
            h(
              'tr',
              { key: f.id },
              h('td', null, `${f.title || f.file} (#${f.id})`),
              h('td', null, h('code', null, f.code), ' ', f.message),
              h('td', null, String(f.attempts)),
              h(
                'td',
                null,
                settings.canManage && !f.retrying
                  ? h(
                      Button,
                      { variant: 'secondary', disabled: busy, onClick: () => act('retry', { ids: [f.id] }) },
                      __('Retry', 'compresso'),
                    )
                  : f.retrying
                    ? __('Queued again', 'compresso')
                    : '',
              ),
            ),
          ),
        ),
      ),
      settings.canManage && run.failed.length > 1
        ? h(
            Button,
            { variant: 'secondary', disabled: busy, onClick: () => act('retry', {}) },
            __('Retry all', 'compresso'),
          )
        : null,
    ),
  );
}

function App() {
  const [run, setRun] = useState(null);
  const [stats, setStats] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  // The buttons change with the run (Start becomes Pause, Pause becomes Resume, Pause goes when the run
  // is done): the focused one is removed. A keyboard user would be thrown back to the top of the page,
  // so focus moves to the first button of the new set while it was in the set before.
  const controls = useRef(null);
  const hadFocus = useRef(false);

  const load = useCallback(() => {
    return apiFetch({ path: '/compresso/v1/bulk' })
      .then(setRun)
      .catch((e) => setError(e.message));
  }, []);
  const loadStats = useCallback(() => {
    return apiFetch({ path: '/compresso/v1/stats' })
      .then(setStats)
      .catch((e) => setError(e.message));
  }, []);

  useEffect(() => {
    load();
    if (settings.connected) loadStats();
  }, [load, loadStats]);

  // While a run is active, its progress is read every few seconds (each read also restarts a tick
  // whose loopback request was lost).
  const active = run && ACTIVE.includes(run.status);
  useEffect(() => {
    if (!active) return undefined;
    const timer = setInterval(load, 4000);
    return () => clearInterval(timer);
  }, [active, load]);
  useEffect(() => {
    if (run && run.status === 'done' && settings.connected) loadStats();
  }, [run?.status, loadStats]);

  useEffect(() => {
    const box = controls.current;
    if (busy || !hadFocus.current || !box) return;
    const focused = document.activeElement;
    if (focused && focused !== document.body) return;
    const first = box.querySelector('button:not([disabled])');
    if (first) first.focus();
  }, [run?.status, busy]);

  const act = (action, data) => {
    setBusy(true);
    setError(null);
    return apiFetch({ path: `/compresso/v1/bulk/${action}`, method: 'POST', data })
      .then(setRun)
      .catch((e) => setError(e.message))
      .finally(() => setBusy(false));
  };

  if (!settings.connected) {
    return h(
      Notice,
      { status: 'warning', isDismissible: false },
      __('Connect the plugin to a Compresso server first.', 'compresso'),
      ' ',
      h('a', { href: settings.settingsUrl }, __('Go to the settings', 'compresso')),
    );
  }
  if (!run) return h(Spinner);
  const buttons = [];
  if (settings.canManage) {
    if (!['running', 'paused', 'waiting'].includes(run.status)) {
      buttons.push(
        h(
          Button,
          { key: 'start', variant: 'primary', isBusy: busy, disabled: busy, onClick: () => act('start') },
          run.status === 'idle'
            ? __('Optimize the whole library', 'compresso')
            : __('Start a new run', 'compresso'),
        ),
      );
    }
    if (ACTIVE.includes(run.status)) {
      buttons.push(
        h(
          Button,
          { key: 'pause', variant: 'secondary', disabled: busy, onClick: () => act('pause') },
          __('Pause', 'compresso'),
        ),
      );
    }
    if (run.status === 'paused') {
      buttons.push(
        h(
          Button,
          { key: 'resume', variant: 'primary', disabled: busy, onClick: () => act('resume') },
          __('Resume', 'compresso'),
        ),
      );
    }
    if (['running', 'paused', 'waiting'].includes(run.status)) {
      buttons.push(
        h(
          Button,
          {
            key: 'cancel',
            variant: 'tertiary',
            isDestructive: true,
            disabled: busy,
            onClick: () => act('cancel'),
          },
          __('Cancel the run', 'compresso'),
        ),
      );
    }
  }
  return h(
    'div',
    { className: 'compresso-bulk' },
    error ? h(Notice, { status: 'error', onRemove: () => setError(null) }, error) : null,
    h(
      Card,
      null,
      h(CardHeader, null, h('h2', null, __('What it costs', 'compresso'))),
      h(
        CardBody,
        null,
        h(Cost, { stats }),
        h(Quota, { quota: run.quota && run.quota.limit != null ? run.quota : stats?.quota }),
      ),
    ),
    h(
      Card,
      null,
      h(CardHeader, null, h('h2', null, __('Bulk optimization', 'compresso'))),
      h(
        CardBody,
        null,
        h('p', { className: `compresso-bulk-status is-${run.status}`, role: 'status' }, statusText(run)),
        run.total ? h(Progress, { run }) : null,
        h(
          'div',
          {
            ref: controls,
            style: { display: 'flex', flexWrap: 'wrap', gap: '8px' },
            onFocus: () => {
              hadFocus.current = true;
            },
            // Focus leaving for another element, or for nothing while the button is still there (a
            // click on the page), ends it; a button disabled or removed under the focus does not.
            onBlur: (event) => {
              const to = event.relatedTarget;
              if (to && event.currentTarget.contains(to)) return;
              hadFocus.current = !to && (!event.target.isConnected || event.target.disabled);
            },
          },
          buttons,
        ),
        settings.canManage
          ? null
          : h('p', null, __('Only an administrator can start or stop a run.', 'compresso')),
      ),
    ),
    h(Errors, { run, act, busy }),
  );
}

const root = document.getElementById('compresso-bulk-root');
if (root) {
  // createRoot is React 18 (WordPress 6.2+); render() is kept for older copies of wp-element.
  if (createRoot) createRoot(root).render(h(App));
  else render(h(App), root);
}
