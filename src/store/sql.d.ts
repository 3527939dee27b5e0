// Migration files are bundled as text (esbuild's text loader; a small plugin in vitest).
declare module '*.sql' {
  const text: string;
  export default text;
}
