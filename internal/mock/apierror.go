package mock

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// errorTypes are the OpenAI error types vLLM uses per status.
var errorTypes = map[int]string{
	400: "BadRequestError", 404: "NotFoundError", 413: "BadRequestError",
	429: "RateLimitError", 500: "InternalServerError", 503: "ServiceUnavailableError",
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
