// Package llm is the llm capability kind: the right to ask one language
// model, behind one OpenAI-compatible chat-completions endpoint (what
// llama.cpp's llama-server, Ollama, vLLM and hosted providers speak: POST
// ENDPOINT/v1/chat/completions), for some models, within limits, showing
// it only what its clearance admits. The model is the part of an agent
// Mandate trusts least: it is reached only through this capability, what
// it is shown is a flow the kernel checks, and what it answers carries the
// labels of what it was shown.
//
// # Grant spec
//
//	cap "llm" "model" {
//	  endpoint       = "http://127.0.0.1:8080"   # required; a trailing /v1 is dropped
//	  models         = ["qwen2.5-7b-instruct"]   # required: the model names calls may ask for
//	  api_key        = { env = "LLM_API_KEY" }   # optional, or { file = "key.txt" }: sent as
//	                                             # Authorization: Bearer, by the kernel only
//	  max_tokens     = 1024                      # most tokens one answer may have (default 1024)
//	  timeout        = "2m"                      # per call (default 2m, at most 30m)
//	  allow_private  = true                      # loopback/private endpoints only when true
//	  clearance      = ["pii:alice"]             # what the provider may be shown (default: public data only)
//	  refuses_taints = ["web:*"]                 # optional: taints the provider may not be shown (EFLOW naming
//	                                             # the taint); accepts_untrusted = false: none at all
//	  endorse_schema = false                     # extract may drop an answer's integrity taints
//	  max_request_bytes  = "4MiB"                # the request posted, spliced blobs included
//	  max_response_bytes = "4MiB"                # the answer read
//	  budget         = "100k"                    # kernel-level: tokens for this capability and
//	                                             # everything derived from it
//	}
//
// | field | default | narrowing |
// |---|---|---|
// | endpoint | required | fixed |
// | models | required | a subset |
// | api_key | none | fixed (never shown: the graph and cap_describe say where it was read) |
// | max_tokens | 1024 | at most the parent's |
// | timeout | 2m | at most the parent's |
// | allow_private | false | fixed |
// | clearance | public | within the parent's |
// | accepts_untrusted, refuses_taints | true, none | refusing at least the parent's taints |
// | endorse_schema | false | may be turned off, never on |
// | max_request_bytes, max_response_bytes | 4 MiB | at most the parent's |
//
// The kernel's own attributes apply as to every kind: budget (tokens,
// "100000" or "100k"), max_uses, rate, when and approve_when (over
// request.model, .max_tokens, .messages, .prompt_bytes, .tools, .spliced,
// .op, .format), audit.
//
// # Operations
//
// chat takes an abi.ChatRequest (the OpenAI request: model, messages,
// tools, tool_choice, max_tokens, temperature, response_format) and
// returns an abi.ChatResponse (the assistant message with its content and
// tool calls, finish_reason, usage). extract is chat whose answer must
// validate against a closed schema, and comes back endorsed, rewritten
// in canonical form. Errnos:
//
//   - EINVAL: a malformed request (a role, a tool name, a schema that does
//     not compile, a placeholder naming no spliced blob, a spliced blob
//     that is not UTF-8 text).
//   - EDENIED: a model not allowed, max_tokens above the capability's,
//     extract on a capability that may not endorse, or with an open schema
//     (the error names the first free string or unbounded number).
//   - EFLOW: the task's label, or a spliced blob's, may not be shown to
//     this provider (its clearance); nothing is sent.
//   - ELIMIT: the request or the answer past its bound; the token budget
//     spent (the kernel's).
//   - EIO: the endpoint refused (its error message, printable, key
//     redacted), answered something that is not a chat completion, or an
//     answer that does not match the requested json_object or json_schema
//     or that extract cannot read exactly (never returned); ETIMEDOUT past
//     the timeout.
//
// # Labels through the model
//
// A prompt is a sink: the calling task's label and the label of every
// blob spliced into it (abi.SplicePlaceholder(i) in a message's content,
// replaced by the kernel with Splice[i]'s bytes, which the task never
// reads; a fetch result, abi.HTTPResponse, is spliced as its body) must
// flow to the capability's clearance, or the call is EFLOW and
// nothing is sent. A hosted model is cleared for public data by default; a
// local model on loopback can be cleared for "pii:alice".
//
// The answer is a blob labelled with the join of the task's label and
// every spliced blob's label (confidentiality and integrity), plus the
// integrity taint "llm:ENDPOINT": an answer influenced by untrusted text
// is untrusted, and a net capability with accepts_untrusted = false
// refuses it. A model that was shown PII can encode it in any answer,
// which is why the answer carries the PII's label: labels through a model
// bound where what it saw may go, not what it says.
//
// # Quarantined extraction
//
// extract is how a task that must read untrusted text hands on something
// an attacker could not phrase. The kernel checks that the schema is
// closed (checkClosed): every value it admits is a boolean, a number with
// a minimum and a maximum, a constant the schema lists (enum or const, at
// most 64, strings at most 64 bytes), or an array (maxItems at most 64)
// or object (additionalProperties false) of those; no free string, no
// pattern, no format, no $ref, no combinators.
//
// It reads the answer as it reads a guest's document
// (kindapi.DecodeJSONValue, through abi.CheckJSON): a key given twice at
// any depth, compared after unescaping ("rating" and "r\u0061ting"), two
// keys equal but for case, a string that is not valid UTF-8 or holds a
// lone surrogate escape, a number that would not be read exactly and
// data after the value are each an error (EIO, the answer is withheld):
// encoding/json would have read one value where the text holds another.
// So is an answer with tool calls, which no schema validates. It validates the value it read against the schema
// (github.com/google/jsonschema-go); an answer that does not validate is
// an error.
//
// What is endorsed is the value that validated, never the provider's
// text: the content of the result is the kernel's canonical serialisation
// of that value (object keys sorted by their bytes, no white space, whole
// numbers as integers and others in their shortest form, strings escaped
// as encoding/json does but with no HTML escapes), so an answer can carry
// nothing the schema did not admit, in its white space, escapes or
// repeated keys. An endorsed answer keeps its confidentiality tags but
// drops every integrity taint, and the call, like every call of this
// kind, is in the audit log ("call:extract"). So a reader child that
// splices an untrusted review into the prompt can hand its parent
// {"rating":4,"wifi":true} and nothing else.
//
// chat with a response_format of json_object or json_schema is not
// endorsed: its answer is checked (abi.CheckJSON's rules: no key given
// twice, valid UTF-8, nothing after the value; and the schema) and
// returned as the provider wrote it, tainted.
//
// # Tokens
//
// A call reserves, from every token budget on the capability's chain,
// max_tokens plus the size of the request body in bytes, before anything
// is sent. So racing children can never spend past a shared budget.
//
// After the call it is charged the larger of the total the endpoint
// reports and a bound the kernel computes from what it sent and
// received, and the rest of the reservation is given back
// (kindapi.Result.Spent). No offline tokenizer covers the models these
// servers run, so the bound is in bytes, and is an upper bound for
// byte-level BPE tokenizers (llama, qwen, mistral and their kind), every
// token of which is at least one byte of text:
//
//   - prompt tokens are at most the bytes of the request body posted (the
//     JSON framing outweighs the chat template's tokens);
//   - completion tokens are at most the smaller of max_tokens and the
//     bytes of the answer's content plus its tool calls' names and
//     arguments.
//
// So an endpoint reporting 0 tokens, or 1, is charged the bound; one
// reporting more than the bound is charged what it reported (a reasoning
// model's hidden tokens, say), at most the reservation. A missing or
// unbelievable usage (negative, or inconsistent) counts the whole
// reservation. The result's usage (abi.ChatUsage) is what the endpoint
// reported; its charged field is what the kernel took from the budgets.
// Budgets are thus roughly in bytes: a prompt of 30 KB costs about 30k
// tokens of budget whatever the endpoint says.
//
// # The client
//
// The HTTP client is written here on net/http, not taken from a provider's
// SDK: those read ambient environment variables (keys, base URLs,
// proxies), which a kernel that injects keys must not do. No proxy, no
// cookies, no redirects; every address is checked by the egress guard
// (internal/egress); streaming is never asked for; the answer is read to
// max_response_bytes; an answer that contains the API key is withheld.
package llm
