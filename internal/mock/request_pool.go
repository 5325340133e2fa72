package mock

import (
	"encoding/json"
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/fnv1a"
)

// poolRequest is what the mock reads of a request to a non-generating API
// (embeddings, rerank, score): the sequences the model computes, each a
// prefill with no output.
type poolRequest struct {
	Model string
	// seqs are the texts the model reads, one per computed sequence: an
	// embedding input, a rerank query and document, a score pair (the
	// query and document joined with a newline); tokens counts each.
	seqs   []string
	tokens []int
	// Embeddings: the vector size and whether they go as base64.
	dims   int
	base64 bool
	// Rerank: the documents' text, how many results (0: all), and
	// whether results carry their document.
	docs      []string
	topN      int
	returnDoc bool
}

// parsePool decodes and validates the body of a request to the
// non-generating API name, counting each sequence's tokens with tc.
func parsePool(body []byte, name api.Name, tc TokenCounter, dims int) (*poolRequest, error) {
	var p *poolRequest
	var err error
	switch name {
	case api.Embeddings:
		p, err = parseEmbeddings(body, tc, dims)
	case api.Rerank:
		p, err = parseRerank(body)
	default:
		p, err = parseScore(body)
	}
	if err != nil {
		return nil, err
	}
	if p.tokens == nil {
		for _, s := range p.seqs {
			p.tokens = append(p.tokens, tc.Count(s))
		}
	}
	return p, nil
}

// prompt is the request's inputs as the log and the generator see them:
// one "input" message per sequence.
func (p *poolRequest) prompt() prompt {
	pr := prompt{hash: fnv1a.Offset, messages: len(p.seqs)}
	for i, s := range p.seqs {
		pr.hash = chain(pr.hash, "input", s)
		pr.tokens += p.tokens[i]
	}
	return pr
}

// parseEmbeddings reads input (a string, strings, token ids, or arrays of
// token ids), encoding_format (float or base64) and dimensions.
func parseEmbeddings(body []byte, tc TokenCounter, dims int) (*poolRequest, error) {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     *int            `json:"dimensions"`
	}
	if err := decodeBody(body, &req); err != nil {
		return nil, err
	}
	p := &poolRequest{Model: req.Model, dims: dims}
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		p.base64 = true
	default:
		return nil, invalid("encoding_format", "encoding_format %q: expected \"float\" or \"base64\"", req.EncodingFormat)
	}
	if req.Dimensions != nil {
		if *req.Dimensions < 1 || *req.Dimensions > dims {
			return nil, invalid("dimensions", "dimensions %d: the model's embeddings have 1 to %d dimensions", *req.Dimensions, dims)
		}
		p.dims = *req.Dimensions
	}
	if !present(req.Input) {
		return nil, invalid("input", "field \"input\" is required")
	}
	var one string
	var many []string
	var ids []int
	var idLists [][]int
	switch {
	case json.Unmarshal(req.Input, &one) == nil:
		p.seqs = []string{one}
	case json.Unmarshal(req.Input, &many) == nil:
		p.seqs = many
	case json.Unmarshal(req.Input, &ids) == nil:
		p.seqs, p.tokens = []string{idsText(ids)}, []int{len(ids)}
	case json.Unmarshal(req.Input, &idLists) == nil:
		for _, l := range idLists {
			p.seqs, p.tokens = append(p.seqs, idsText(l)), append(p.tokens, len(l))
		}
	default:
		return nil, invalid("input", "input: expected a string, an array of strings, an array of token ids or an array of such arrays")
	}
	if len(p.seqs) == 0 {
		return nil, invalid("input", "input must not be empty")
	}
	for i, s := range p.seqs {
		if (p.tokens == nil && tc.Count(s) == 0) || (p.tokens != nil && p.tokens[i] == 0) {
			return nil, invalid("input", "input[%d] is empty", i)
		}
	}
	return p, nil
}

// idsText is token ids as the text the generator hashes.
func idsText(ids []int) string {
	var b []byte
	for _, id := range ids {
		b = strconv.AppendInt(append(b, ','), int64(id), 10)
	}
	return string(b)
}

// textOrObject reads a string or an object with "text" (Cohere's and
// Jina's document objects, AIPerf's query).
func textOrObject(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var o struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Text != nil {
		return *o.Text, true
	}
	return "", false
}

// parseRerank reads query, documents (strings or {"text"} objects), top_n
// (0 or absent: all) and return_documents.
func parseRerank(body []byte) (*poolRequest, error) {
	var req struct {
		Model           string            `json:"model"`
		Query           json.RawMessage   `json:"query"`
		Documents       []json.RawMessage `json:"documents"`
		TopN            *int              `json:"top_n"`
		ReturnDocuments *bool             `json:"return_documents"`
	}
	if err := decodeBody(body, &req); err != nil {
		return nil, err
	}
	if !present(req.Query) {
		return nil, invalid("query", "field \"query\" is required")
	}
	q, ok := textOrObject(req.Query)
	if !ok {
		return nil, invalid("query", "query: expected a string or {\"text\": ...}")
	}
	if len(req.Documents) == 0 {
		return nil, invalid("documents", "field \"documents\" must contain at least one document")
	}
	p := &poolRequest{Model: req.Model, returnDoc: req.ReturnDocuments == nil || *req.ReturnDocuments}
	for i, raw := range req.Documents {
		d, ok := textOrObject(raw)
		if !ok {
			return nil, invalid("documents", "documents[%d]: expected a string or {\"text\": ...}", i)
		}
		p.docs = append(p.docs, d)
		p.seqs = append(p.seqs, q+"\n"+d)
	}
	if req.TopN != nil {
		if *req.TopN < 0 {
			return nil, invalid("top_n", "top_n must not be negative, got %d", *req.TopN)
		}
		p.topN = *req.TopN
	}
	return p, nil
}

// parseScore reads text_1 and text_2, each a string or a list: one text_1
// against every text_2, or the two lists pairwise (as vLLM pairs them).
func parseScore(body []byte) (*poolRequest, error) {
	var req struct {
		Model string          `json:"model"`
		Text1 json.RawMessage `json:"text_1"`
		Text2 json.RawMessage `json:"text_2"`
	}
	if err := decodeBody(body, &req); err != nil {
		return nil, err
	}
	list := func(name string, raw json.RawMessage) ([]string, error) {
		if !present(raw) {
			return nil, invalid(name, "field %q is required", name)
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []string{s}, nil
		}
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil || len(l) == 0 {
			return nil, invalid(name, "%s: expected a string or a non-empty array of strings", name)
		}
		return l, nil
	}
	t1, err := list("text_1", req.Text1)
	if err != nil {
		return nil, err
	}
	t2, err := list("text_2", req.Text2)
	if err != nil {
		return nil, err
	}
	switch {
	case len(t1) == 1:
		for range len(t2) - 1 {
			t1 = append(t1, t1[0])
		}
	case len(t1) != len(t2):
		return nil, invalid("text_2", "text_1 has %d texts and text_2 %d: give one text_1 or as many as text_2", len(t1), len(t2))
	}
	p := &poolRequest{Model: req.Model}
	for i := range t2 {
		p.seqs = append(p.seqs, t1[i]+"\n"+t2[i])
	}
	return p, nil
}
