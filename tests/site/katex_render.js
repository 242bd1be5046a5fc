// Renders each formula given on stdin (a JSON list of [tex, displayMode]) with KaTeX, as VS Code's notebooks and
// MyST sites do; prints a JSON list of [index, message] for each that KaTeX rejects.
const katex = require(process.argv[2]);
let input = "";
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const errors = [];
  JSON.parse(input).forEach(([tex, displayMode], index) => {
    try {
      // strict mode only flags LaTeX-compatibility nits that KaTeX still renders (VS Code logs them): not errors
      katex.renderToString(tex, { displayMode, throwOnError: true, strict: "ignore" });
    } catch (error) {
      errors.push([index, error.message]);
    }
  });
  process.stdout.write(JSON.stringify(errors));
});
