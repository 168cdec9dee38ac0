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
    // The webview is a browser app: it never touches the extension host's APIs or sockets.
    files: ['webview/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: ['vscode', 'ws'], patterns: ['../extension/*'] }] },
  },
  {
    files: ['extension/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: ['../webview/*', '../../webview/*'] }] },
  },
);
