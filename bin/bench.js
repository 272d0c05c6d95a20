#!/usr/bin/env node
// Thin launcher: the CLI is written in TypeScript and compiled to dist/ by `npm install` (prepare).
import "../dist/harness/cli/main.js";
