'use strict';
// Node 20's test runner, given a directory (`node --test runners/node/`), only runs files
// named like *.test.js; the tests themselves are in test_kernel.js.
require('./test_kernel.js');
