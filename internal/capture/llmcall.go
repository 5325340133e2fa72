package capture

import (
	"strings"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apis"
)

// unparsedLLMPaths are LLM endpoints the proxy forwards but cannot record
// (their bodies are no API of internal/api/apis), each with whose API it
// is. Longer suffixes come first: the first match names the path.
var unparsedLLMPaths = [...]struct{ suffix, api string }{
	{"/api/chat", "Ollama's native chat API"},
	{"/api/generate", "Ollama's native generate API"},
	{"/generate_stream", "TGI's native API"},
	{"/generate", "TGI's or SGLang's native API"},
}

// warnUnparsed logs, once per known endpoint per proxy, that LLM traffic to
// path passes through unrecorded, so a capture never silently misses it.
func (p *Proxy) warnUnparsed(path string) {
	for i, u := range unparsedLLMPaths {
		if !strings.HasSuffix(path, u.suffix) {
			continue
		}
		if p.warned[i].CompareAndSwap(false, true) {
			p.cfg.Logf("capture: POST %s is LLM traffic in %s, which capture does not parse: forwarded untouched, not recorded "+
				"(send it to an OpenAI-compatible or Anthropic endpoint, such as /v1/chat/completions or /v1/messages, to capture it; warned once per path)", path, u.api)
		}
		return
	}
}

// parseCall reads a request body with its API's parser; nil when it is
// not a request of that API (forwarded, not recorded, said once per API:
// a speech-to-text upload of an audio format a trace cannot describe is
// one).
func (p *Proxy) parseCall(spec *apis.Spec, body []byte) *api.Call {
	c, err := spec.ParseRequest(body)
	if err != nil {
		if _, warned := p.parseWarned.LoadOrStore(spec.Name, true); !warned {
			p.cfg.Logf("capture: a POST to the %s API is not a request capture can record (%v): forwarded untouched, not recorded (warned once per API)", spec.Name, err)
		}
		return nil
	}
	return c
}
