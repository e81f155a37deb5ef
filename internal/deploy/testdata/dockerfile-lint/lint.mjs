// Lints a Dockerfile with dockerfile-utils and prints every diagnostic as
// one JSON line; exits 1 when there is any. Every rule is an error here.
import { readFileSync } from "node:fs";
import { validate, ValidationSeverity } from "dockerfile-utils";

const file = process.argv[2];
const text = readFileSync(file, "utf8");
const error = ValidationSeverity.ERROR;
const diags = validate(text, {
  deprecatedMaintainer: error,
  directiveCasing: error,
  emptyContinuationLine: error,
  instructionCasing: error,
  instructionCmdMultiple: error,
  instructionEntrypointMultiple: error,
  instructionHealthcheckMultiple: error,
  instructionJSONInSingleQuotes: error,
  instructionWorkdirRelative: error,
});
for (const d of diags) {
  console.log(JSON.stringify({ line: d.range.start.line + 1, message: d.message, code: d.code }));
}
process.exit(diags.length > 0 ? 1 : 0);
