import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'out/**', 'node_modules/**', '.e2e/**', 'protocol/generated/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-restricted-imports': ['error', { patterns: ['../trainer-server/*'] }],
    },
  },
  {
    // The webviews are browser apps (webview/replay/, webview/dashboard/, and what they share at webview/): they never
    // touch the extension host's APIs or sockets.
    files: ['webview/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: ['vscode', 'ws'], patterns: ['../extension/*', '../../extension/*'] },
      ],
    },
  },
  {
    files: ['extension/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: ['../webview/*', '../../webview/*'] }] },
  },
);
