import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';
import { serve } from './serve-helpers.js';

const HOSTILE = `<script>alert("x")</script> it's`;
const ESCAPED = '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; it&#39;s';
// Prints its argument in red, then fails.
const RED = ['sh', '-c', 'printf "\\033[31m%s\\033[0m\\n" "$1"; exit 3', 'sh', HOSTILE];

// The pages over a real server and both stores: what they show, escaped; their forms.
describe.each(STORES)('serve pages (%s)', (kind) => {
  it('the jobs page lists each job, marks the failing one, filters and sorts', async () => {
    const box = storeBox(kind);
    const [bad, good] = [box.job('bad'), box.job('good')];
    await cronguard(['-n', bad, '--', ...RED], box.env);
    expect(await cronguard(['-n', good, '--', 'true'], box.env)).toMatchObject({ code: 0 });
    const server = await serve([], box.env);
    const page = await (await server.get('/')).text();
    expect(page).toContain(`<tr class="failing" data-job="${bad}">`);
    expect(page).toContain(`<tr class="" data-job="${good}">`);
    expect(page.indexOf(`data-job="${bad}"`)).toBeLessThan(page.indexOf(`data-job="${good}"`));
    expect(await (await server.get(`/?q=${good}`)).text()).not.toContain(`data-job="${bad}"`);
    const failing = await (await server.get('/?state=failing')).text();
    expect(failing).toContain(`data-job="${bad}"`);
    expect(failing).not.toContain(`data-job="${good}"`);
    const byName = await (await server.get('/?sort=-name')).text();
    expect(byName.indexOf(`data-job="${good}"`)).toBeLessThan(byName.indexOf(`data-job="${bad}"`));
    // The sort is a field of the form too (a phone's screen hides the headers).
    expect(byName).toContain('<option value="-name" selected>name, Z to A</option>');
    expect(server.stderr()).toMatch(/ GET \/\?sort=-name 200 /);
  });

  it('the jobs page shows a hundred jobs at a time', async () => {
    const box = storeBox(kind);
    await cronguard(['migrate'], box.env);
    const startedAt = new Date();
    await box.insertRuns(Array.from({ length: 101 }, (_, i) => ({ job: box.job(`many-${String(i).padStart(3, '0')}`), status: 'succeeded', startedAt, durationMs: 10 })));
    const server = await serve(['-q'], box.env);
    const first = await (await server.get('/')).text();
    expect(first).toContain('1–100 of 101 jobs');
    expect(first.match(/<tr class=/g)).toHaveLength(100);
    expect(first).toContain('<a href="?sort=name&amp;page=2" rel="next">next</a>');
    const second = await (await server.get('/?sort=name&page=2')).text();
    expect(second.match(/<tr class=/g)).toHaveLength(1);
    expect(second).toContain(`data-job="${box.job('many-100')}"`);
    expect(await (await server.get('/?q=many-09&page=1')).text()).toContain('10 matching, of 101 jobs');
    // A page past the end says so and leads back to the last one.
    const past = await (await server.get('/?sort=name&page=3')).text();
    expect(past).toContain('<p class="muted">101 jobs</p>');
    expect(past).toContain('There is no page 3: the 101 jobs shown fit on 2 pages.');
    expect(past).toContain('<a href="?sort=name&amp;page=2" rel="prev">back to page 2</a>');
  });

  it('a run page shows its output escaped, with ANSI colours as spans', async () => {
    const box = storeBox(kind);
    const job = box.job('red');
    await cronguard(['-n', job, '--', ...RED], box.env);
    const [run] = await box.runs();
    const server = await serve([], box.env);
    const response = await server.get(`/runs/${run?.id}`);
    const page = await response.text();
    expect(response.status).toBe(200);
    expect(response.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    expect(page).toContain(`<span class="fg1">${ESCAPED}</span>`);
    expect(page).not.toContain('<script>alert');
    expect(page).toMatch(/<dt>Exit<\/dt><dd>3<\/dd>/);
  });

  it('Run now with hostile arguments queues a request, shown escaped on the job page', async () => {
    const box = storeBox(kind);
    const job = box.job('args');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const server = await serve([], box.env);
    const csrf = await server.csrf(`/jobs/${job}`);
    const response = await server.post(`/jobs/${job}/run`, { csrf, args: `${HOSTILE}\nsecond "arg"` });
    expect(response.status).toBe(303);
    const location = response.headers.get('location') as string;
    expect(location).toMatch(new RegExp(`^/jobs/${job}\\?requested=\\d+$`));
    expect((await box.requests()).map((r) => r.args)).toEqual([[HOSTILE, 'second "arg"']]);
    const page = await (await server.get(location)).text();
    expect(page).toContain(`<code class="arg">${ESCAPED}</code> <code class="arg">second &quot;arg&quot;</code>`);
    expect(page).toMatch(/Request \d+ queued/);
    expect(page).not.toContain('<script>alert');
  });

  it('Pause (with a reason) and Resume', async () => {
    const box = storeBox(kind);
    const job = box.job('pause');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const server = await serve([], box.env);
    const csrf = await server.csrf(`/jobs/${job}`);
    expect((await server.post(`/jobs/${job}/pause`, { csrf, reason: '<b>"maintenance"</b>' })).status).toBe(303);
    expect(await cronguard(['-v', '-n', job, '--', 'false'], box.env)).toMatchObject({ code: 0 });
    const page = await (await server.get(`/jobs/${job}`)).text();
    expect(page).toContain('<span class="reason">&lt;b&gt;&quot;maintenance&quot;&lt;/b&gt;</span>');
    expect(page).toContain('>Resume</button>');
    expect((await server.post(`/jobs/${job}/resume`, { csrf })).status).toBe(303);
    expect(await (await server.get(`/jobs/${job}`)).text()).toContain('>Pause</button>');
  });

  it('refuses a POST without a valid CSRF token or from another origin (403), recording nothing', async () => {
    const box = storeBox(kind);
    const job = box.job('csrf');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const server = await serve([], box.env);
    const csrf = await server.csrf(`/jobs/${job}`);
    expect((await server.post(`/jobs/${job}/run`, {})).status).toBe(403);
    expect((await server.post(`/jobs/${job}/run`, { csrf: 'f'.repeat(64) })).status).toBe(403);
    expect((await server.post(`/jobs/${job}/run`, { csrf }, { headers: { origin: 'http://evil.example' } })).status).toBe(403);
    expect((await server.post(`/jobs/${job}/pause`, { csrf: `${csrf}0` })).status).toBe(403);
    // Without the cookie the field was made for (another browser), the field is worthless.
    const other = await fetch(`${server.url}/jobs/${job}/run`, { method: 'POST', body: new URLSearchParams({ csrf }), redirect: 'manual' });
    expect(other.status).toBe(403);
    // The API's POST wants JSON: a form another site could submit is refused.
    expect((await server.post(`/api/jobs/${job}/requests`, { args: 'x' })).status).toBe(403);
    expect(await box.requests()).toEqual([]);
    expect((await server.get(`/jobs/${job}`)).status).toBe(200);
  });

  it('unknown jobs and runs are 404 pages, malformed ids 400, never a stack trace', async () => {
    const box = storeBox(kind);
    await cronguard(['-n', box.job('x'), '--', 'true'], box.env);
    const server = await serve([], box.env);
    const cases: [string, number][] = [
      ['/jobs/no-such-job', 404], ['/jobs/%3Cscript%3Ealert(1)%3C%2Fscript%3E', 404], ['/jobs/..%2F..%2Fetc', 404], ['/runs/999999', 404],
      ['/runs/%3Cscript%3E%22', 400], ['/runs/1e3', 400], ['/runs/99999999999999999999', 400], ['/no/such/page', 404],
      ['/api/runs/999999', 404], ['/api/runs/x', 400], ['/api/requests/999999', 404], ['/api/jobs/%3Cb%3E/runs', 400],
      [`/jobs/${box.job('x')}?before=abc`, 400],
    ];
    for (const [path, status] of cases) {
      const response = await server.get(path);
      const body = await response.text();
      expect({ path, status: response.status }).toEqual({ path, status });
      expect(body).not.toMatch(/\n\s+at |<script>|Error:/);
    }
    expect(await (await server.get('/runs/%3Cscript%3E%22')).text()).toContain('&#39;&lt;script&gt;&quot;&#39; is not a run id');
    const csrf = await server.csrf(`/jobs/${box.job('x')}`);
    expect((await server.post('/jobs/no-such-job/run', { csrf })).status).toBe(404);
    expect(server.stderr()).not.toMatch(/internal error/);
  });
});
