package mock

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
)

// errorTypes are the OpenAI error types vLLM uses per status.
var errorTypes = map[int]string{
	400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError", 413: "BadRequestError",
	429: "RateLimitError", 500: "InternalServerError", 503: "ServiceUnavailableError",
}

// anthropicTypes are Anthropic's error types per status (503 is how the
// mock's status fault says overloaded; Anthropic's own status for it is 529).
var anthropicTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
	413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 503: "overloaded_error", 529: "overloaded_error",
}

// writeError writes the error body of the request's API: Anthropic's
// {"type":"error","error":{"type":...,"message":...}} for Messages,
// vLLM's {"error":{"message","type","param","code":status}} for the rest.
func (x *exchange) writeError(status int, msg, param string) {
	if x.api == api.Messages {
		writeAnthropicError(x.w, status, msg)
		return
	}
	writeError(x.w, status, msg, param)
}

// writeError writes vLLM's error body:
// {"error":{"message":..., "type":..., "param":..., "code":status}}.
func writeError(w http.ResponseWriter, status int, msg, param string) {
	var p any
	if param != "" {
		p = param
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": errorTypes[status], "param": p, "code": status,
	}})
	writeBody(w, status, body)
}

// writeAnthropicError writes Anthropic's error body.
func writeAnthropicError(w http.ResponseWriter, status int, msg string) {
	typ := anthropicTypes[status]
	if typ == "" {
		typ = "api_error"
	}
	body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	writeBody(w, status, body)
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// checkHeaders applies Config.StrictAnthropic to a Messages request: the
// anthropic-version header is required (400) and so is a key, x-api-key
// or a bearer token (401), as Anthropic's API requires them; vLLM, SGLang
// and the mock by default check neither. A key's value is never looked
// at nor logged.
func (x *exchange) checkHeaders() error {
	if x.api != api.Messages || !x.s.cfg.StrictAnthropic {
		return nil
	}
	h := x.r.Header
	if h.Get("Anthropic-Version") == "" {
		return invalid("", "anthropic-version: header is required")
	}
	if h.Get("X-Api-Key") == "" && h.Get("Authorization") == "" {
		return &badRequest{status: http.StatusUnauthorized, msg: "x-api-key header is required"}
	}
	return nil
}
