// Package llm makes juror calls: one model call that must answer exactly one
// of two values, CONFORMS or REFER (DESIGN.md section 7, EDR "A model may
// choose a route, never widen a bound").
//
// # Contract
//
// A [Juror] never returns an error. [Juror.Judge] returns an [Answer] with one
// of two outcomes:
//
//   - [Answered]: the model gave exactly one valid verdict, echoing the
//     request's nonce. Only then is [Answer.Verdict] meaningful.
//   - [Failed]: anything else — an HTTP error, a transport error, a timeout,
//     a cancelled context, a refusal, an empty answer, a truncated answer,
//     text that is not exactly the verdict object, a wrong nonce, extra
//     fields. [Answer.Failure] says which, starting with one of the
//     Failure* constants.
//
// Every Failed answer is a refer at the caller. There is no configuration in
// which a failure, or any text other than the exact verdict object, resolves
// to CONFORMS. A failure is not retried by default (ProviderConfig.MaxRetries
// is 0): a retry would be a second draw from the same model for the same
// question, and the panel's answer to uncertainty is refer, not "ask again".
//
// # Threat model
//
// The model's output is untrusted: the material it judges is attacker-written
// (a statement, its comments, its literals), and a prompt injection can make
// the model say anything. So the answer is parsed by [ParseAnswer] and
// nothing else: a JSON object with exactly the keys "verdict" and "nonce",
// string values without escapes, the verdict one of the two enum values and
// the nonce equal to the per-request random constant. Structured output (a
// JSON schema with the enum and the nonce as a const) is requested where the
// provider supports it, but servers drop constraints silently, so strict
// local parsing applies always. The nonce makes a canned answer planted in
// the material useless unless the attacker can also read the request.
//
// No free text from the model is interpreted. [Answer.Raw] keeps up to 2 KiB
// of it for the record, and it is untrusted.
//
// # Egress
//
// Each juror has its own HTTP client. It uses the configured proxy and only
// that: environment proxies (HTTP_PROXY, HTTPS_PROXY) are ignored, and so are
// the SDKs' environment defaults (OPENAI_*, ANTHROPIC_*). The API key comes
// only from the getenv function given to [New], under the name in
// ProviderConfig.APIKeyEnv. Redirects are not followed and response bodies
// are capped, so a provider cannot send the call elsewhere or exhaust memory.
package llm
