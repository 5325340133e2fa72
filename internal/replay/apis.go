package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/embeddings"
	"github.com/tracekit/tracekit/internal/api/messages"
	"github.com/tracekit/tracekit/internal/api/rerank"
	"github.com/tracekit/tracekit/internal/api/responses"
	"github.com/tracekit/tracekit/internal/api/transcription"
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// apiPaths are the request paths of the endpoints, relative to a target.
var apiPaths = map[Endpoint]string{
	EndpointChat:           "/v1/chat/completions",
	EndpointCompletions:    "/v1/completions",
	EndpointResponses:      "/v1/responses",
	EndpointMessages:       "/v1/messages",
	EndpointEmbeddings:     "/v1/embeddings",
	EndpointRerank:         "/v1/rerank",
	EndpointScore:          "/v1/score",
	EndpointTranscriptions: "/v1/audio/transcriptions",
	EndpointTranslations:   "/v1/audio/translations",
}

// speech reports whether ep is a speech-to-text API: its request is a
// multipart upload of the turn's audio, and carries no history.
func speech(ep Endpoint) bool { return ep == EndpointTranscriptions || ep == EndpointTranslations }

// contentType is the Content-Type of ep's request bodies.
func contentType(ep Endpoint) string {
	if speech(ep) {
		return transcription.ContentType
	}
	return "application/json"
}

// endpointOf is the API turn t is sent on: the run's --endpoint when it
// overrides the trace or the turn names none, else the turn's own.
func (r *Runner) endpointOf(t *trace.Turn) Endpoint {
	if r.cfg.EndpointOverride || t.Endpoint == "" {
		return r.cfg.Endpoint
	}
	return Endpoint(t.Endpoint)
}

// encodedHere reports whether requests on ep are the run's chat or
// completions bodies, whose messages conv.go and graph.go encode once and
// copy (request.go); the other APIs' bodies are encoded whole by their
// package each request (appendAPIBody).
func (r *Runner) encodedHere(ep Endpoint) bool {
	return ep == r.bo.endpoint && (ep == EndpointChat || ep == EndpointCompletions)
}

// allEncodedHere reports whether every turn of conv is encodedHere.
func (r *Runner) allEncodedHere(conv []trace.Turn) bool {
	for i := range conv {
		if !r.encodedHere(r.endpointOf(&conv[i])) {
			return false
		}
	}
	return true
}

// appendAPIBody appends the request body of turn on ep for model, the
// conversation so far (history) and the turn's messages msgs. prevID,
// when not empty, chains a Responses request to the previous answer
// (of history, only its system messages are sent, as instructions). Chat and completions bodies are those of
// appendRequest, byte for byte.
func (r *Runner) appendAPIBody(dst []byte, ep Endpoint, model string, turn *trace.Turn, history, msgs []trace.Message, prevID string) []byte {
	if ep == EndpointChat || ep == EndpointCompletions {
		bo := r.bo
		bo.endpoint = ep
		return bo.appendRequest(dst, model, history, msgs, turn.OutputTokens, turn.NonStreaming, turn.Tools, turn.ToolChoice)
	}
	req := api.Request{Model: model, MaxTokens: turn.OutputTokens, NonStreaming: turn.NonStreaming,
		Tools: turn.Tools, ToolChoice: turn.ToolChoice, Temperature: r.cfg.Temperature, IgnoreEOS: r.cfg.IgnoreEOS,
		ReasoningEffort: r.cfg.ReasoningEffort, ThinkingBudget: r.cfg.ThinkingBudget,
		PreviousResponseID: prevID, Extra: r.bo.extra}
	switch ep {
	case EndpointResponses:
		return responses.AppendRequest(dst, &req, history, msgs)
	case EndpointMessages:
		return messages.AppendRequest(dst, &req, history, msgs)
	case EndpointEmbeddings:
		return embeddings.AppendRequest(dst, &req, msgs)
	case EndpointRerank:
		return rerank.AppendRequest(dst, &req, msgs)
	case EndpointScore:
		return rerank.AppendScoreRequest(dst, &req, msgs)
	case EndpointTranscriptions, EndpointTranslations:
		return transcription.AppendRequest(dst, &req, msgs)
	}
	panic("replay: no request encoder for endpoint " + string(ep)) // ParseEndpoint admits no other
}

// checkTurn says why turn t cannot be sent on ep, nil when it can: the
// non-generating APIs carry no conversation, tools or agent graph, and
// their items only; the generating ones carry no items of those.
func checkTurn(t *trace.Turn, ep Endpoint) error {
	if !trace.KnownEndpoint(string(ep)) {
		return fmt.Errorf("endpoint %q: expected one of %s", ep, strings.Join(trace.Endpoints, ", "))
	}
	for i := range t.Messages {
		for j := range t.Messages[i].Media {
			it := &t.Messages[i].Media[j]
			if !trace.CarriesMedia(string(ep), it.Kind) {
				return fmt.Errorf("message %d carries %s media, which %s cannot carry", i, it.Kind, ep)
			}
			if it.Data != "" {
				continue // made or loaded already
			}
			if it.Hash != "" {
				if !trace.ValidMediaHash(it.Hash) {
					return fmt.Errorf("message %d media item %d: hash %q is not a lower-case hex SHA-256", i, j, it.Hash)
				}
				continue // a real item: its bytes are in the media file (openMediaStore)
			}
			if err := media.Check(it); err != nil {
				return fmt.Errorf("message %d media item %d: %w", i, j, err)
			}
		}
	}
	if speech(ep) {
		return checkSpeech(t, ep)
	}
	gen := trace.Generates(string(ep))
	if gen {
		for i := range t.Messages {
			switch role := t.Messages[i].Role; role {
			case trace.RoleInput, trace.RoleQuery, trace.RoleDocument:
				return fmt.Errorf("message %d has role %q, an item of embeddings, rerank or score, which %s does not carry", i, role, ep)
			}
		}
		return nil
	}
	switch {
	case t.Tools != "" || len(t.ReferenceToolCalls) > 0:
		return fmt.Errorf("it calls tools, which %s cannot carry", ep)
	case len(t.Parents) > 0 || len(t.After) > 0:
		return fmt.Errorf("it is a node of an agent graph (parents or waits), which %s cannot carry", ep)
	case len(t.Messages) == 0:
		return fmt.Errorf("it has no messages: %s needs at least one item", ep)
	}
	queries, docs := 0, 0
	for i := range t.Messages {
		m := &t.Messages[i]
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" {
			return fmt.Errorf("message %d carries a tool call or result, which %s cannot carry", i, ep)
		}
		switch {
		case ep == EndpointEmbeddings && (m.Role == trace.RoleInput || m.Role == "user"):
		case ep != EndpointEmbeddings && m.Role == trace.RoleQuery:
			queries++
		case ep != EndpointEmbeddings && m.Role == trace.RoleDocument:
			docs++
		default:
			want := `"input" (or "user")`
			if ep != EndpointEmbeddings {
				want = `"query" or "document"`
			}
			return fmt.Errorf("message %d has role %q: %s takes messages of role %s", i, m.Role, ep, want)
		}
	}
	if ep != EndpointEmbeddings && (queries != 1 || docs == 0) {
		return fmt.Errorf("it has %d query and %d document messages: %s needs one query and at least one document", queries, docs, ep)
	}
	return nil
}

// checkSpeech says why turn t cannot be sent on a speech-to-text API:
// it uploads one audio clip, with the turn's text as its prompt, and
// calls no tools.
func checkSpeech(t *trace.Turn, ep Endpoint) error {
	audio := 0
	for i := range t.Messages {
		m := &t.Messages[i]
		audio += len(m.Media)
		switch {
		case len(m.ToolCalls) > 0 || m.ToolCallID != "":
			return fmt.Errorf("message %d carries a tool call or result, which %s cannot carry", i, ep)
		case m.Role == trace.RoleInput || m.Role == trace.RoleQuery || m.Role == trace.RoleDocument:
			return fmt.Errorf("message %d has role %q, an item of embeddings, rerank or score, which %s does not carry", i, m.Role, ep)
		}
	}
	switch {
	case t.Tools != "" || len(t.ReferenceToolCalls) > 0:
		return fmt.Errorf("it calls tools, which %s cannot carry", ep)
	case len(t.Parents) > 0 || len(t.After) > 0:
		return fmt.Errorf("it is a node of an agent graph (parents or waits), which %s cannot carry", ep)
	case audio != 1:
		return fmt.Errorf("it has %d audio clips: %s uploads exactly one (synth --audio-seconds puts one on a turn)", audio, ep)
	}
	return nil
}

// checkEndpoints reads the whole source once before the run (a file is
// opened again; another Source is checked conversation by conversation
// as it is launched, launchCheck) and refuses a turn its endpoint cannot
// carry, naming the conversation and turn. It notes whether any turn is
// sent on chat or completions: only then does the run's probe (a chat or
// completions request) tell anything.
func (r *Runner) checkEndpoints() error {
	r.sendsChat, r.checked, r.hasMedia, r.realMedia = false, true, false, nil
	var next func() ([]trace.Turn, error)
	switch s := r.src.(type) {
	case *MemorySource:
		m := &MemorySource{meta: s.meta, turns: s.turns}
		next = m.Next
	case *FileSource:
		f, err := OpenFile(s.path)
		if err != nil {
			return err
		}
		defer f.Close()
		next = f.Next
		r.tracePath = s.path
	default:
		r.sendsChat, r.checked = true, false // not known before the run: probe as before
		return nil
	}
	seen := map[string]bool{}
	for row := int64(0); ; {
		conv, err := next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // a damaged row: the run meets it where it reaches it, as without the check
		}
		chat, err := r.checkConv(conv)
		if err != nil {
			return err
		}
		r.realMedia = appendRealMedia(r.realMedia, seen, conv, row)
		row += int64(len(conv))
		r.hasMedia = r.hasMedia || convHasMedia(conv)
		r.sendsChat = r.sendsChat || chat
	}
}

// checkConv checks every turn of conv (checkTurn) and reports whether one
// goes to chat or completions.
func (r *Runner) checkConv(conv []trace.Turn) (chat bool, err error) {
	for i := range conv {
		t := &conv[i]
		ep := r.endpointOf(t)
		if ep == EndpointChat || ep == EndpointCompletions {
			chat = true
		}
		if err := checkTurn(t, ep); err != nil {
			where := ""
			if p, ok := apiPaths[ep]; ok {
				where = " (" + p + ")"
			}
			return chat, fmt.Errorf("conversation %q turn %d cannot be sent on %s%s: %w", t.ConversationID, t.Turn, ep, where, err)
		}
	}
	return chat, nil
}

// setAPIHeaders sets what ep's requests carry beyond the run's headers:
// Messages authenticates with x-api-key (never Authorization) and names
// its version; the others take the Authorization prepare set.
func (t *target) setAPIHeaders(req *fasthttp.Request, ep Endpoint) {
	if ep != EndpointMessages {
		return
	}
	if t.auth != "" && t.headers["Authorization"] == "" {
		req.Header.Del("Authorization")
	}
	if t.key != "" {
		req.Header.Set("x-api-key", t.key)
	}
	req.Header.Set("anthropic-version", messages.Version)
}

// closedLoopAPI is closedLoop for a conversation with a turn on another
// API than the run's chat or completions encoding: each turn's body is
// encoded whole from the history (the live answers, as in a chat) by its
// API's package. A Responses turn after a Responses answer with
// --responses-state server sends only its new messages, chained by
// previous_response_id.
func (r *runState) closedLoopAPI(runCtx, stopCtx context.Context, conv []trace.Turn, at int64, onTime bool) {
	ex := r.exPool.Get().(*exchange)
	defer r.exPool.Put(ex)
	var hist []trace.Message
	var histTokens int32
	prevID := ""
	for k := range conv {
		turn := &conv[k]
		if k > 0 {
			at = r.start + ex.rec.DoneNs + r.scale(turn.ThinkTimeNs)
		}
		ep := r.endpointOf(turn)
		msgs, tokens := r.messages(turn)
		gen := trace.Generates(string(ep))
		input := tokens
		ex.media = mediaOf(msgs)
		switch {
		case !gen || speech(ep):
			ex.body = r.appendAPIBody(ex.body[:0], ep, r.model(turn), turn, nil, msgs, "")
		case ep == EndpointResponses && r.cfg.ResponsesState == ResponsesServer && prevID != "":
			ex.body = r.appendAPIBody(ex.body[:0], ep, r.model(turn), turn, hist, msgs, prevID) // the encoder sends only msgs, and the instructions
			input += histTokens
		default:
			ex.body = r.appendAPIBody(ex.body[:0], ep, r.model(turn), turn, hist, msgs, "")
			input += histTokens
			ex.media = ex.media.plus(mediaOf(hist))
		}
		if !r.waitUntil(stopCtx, at, k == 0 && onTime) {
			return
		}
		ex.agent = 0
		if !r.do(runCtx, stopCtx, ex, turn, ex.body, input, at) {
			return
		}
		if gen {
			prevID = ""
			if ep == EndpointResponses && ex.rec.ErrorKind == trace.ErrNone {
				prevID = ex.stream.ResponseID()
			}
			if k+1 < len(conv) {
				answer := r.chatAnswer(ex, turn)
				hist = append(append(hist, msgs...), answer)
				histTokens += tokens + answer.Tokens
			}
		}
		if runCtx.Err() != nil {
			return
		}
	}
}

// openLoopAPI is openLoop for a conversation with a turn on another API
// than the run's chat or completions encoding: every turn at its arrival
// offset with the reference history, encoded whole by its API's package.
func (r *runState) openLoopAPI(runCtx, stopCtx context.Context, conv []trace.Turn) {
	done := make(chan struct{}, len(conv))
	launched := 0
	var hist []trace.Message
	var histTokens int32
	for k := range conv {
		turn := &conv[k]
		at := r.start + r.scale(turn.ArrivalOffsetNs)
		ep := r.endpointOf(turn)
		msgs, tokens := r.messages(turn)
		gen := trace.Generates(string(ep))
		bp := r.bodies.Get().(*[]byte)
		input := tokens
		media := mediaOf(msgs)
		if gen && !speech(ep) {
			*bp = r.appendAPIBody((*bp)[:0], ep, r.model(turn), turn, hist, msgs, "")
			input += histTokens
			media = media.plus(mediaOf(hist))
		} else {
			*bp = r.appendAPIBody((*bp)[:0], ep, r.model(turn), turn, nil, msgs, "")
		}
		if !r.waitUntil(stopCtx, at, true) {
			r.bodies.Put(bp)
			break
		}
		launched++
		go func() {
			defer func() { done <- struct{}{} }()
			defer r.bodies.Put(bp)
			ex := r.exPool.Get().(*exchange)
			defer r.exPool.Put(ex)
			ex.agent = 0
			ex.media = media
			r.do(runCtx, stopCtx, ex, turn, *bp, input, at)
		}()
		if gen && k+1 < len(conv) {
			answer := r.referenceAnswer(turn)
			hist = append(append(hist, msgs...), answer)
			histTokens += tokens + answer.Tokens
		}
	}
	for range launched {
		<-done
	}
}

// fillAPI sets the record's fields that say which API answered and how:
// its endpoint, reasoning tokens, first answer event and items.
func fillAPI(rec *trace.Record, ex *exchange, ep Endpoint) {
	rec.Endpoint = string(ep)
	ex.stream.FillAnswer(rec)
}
