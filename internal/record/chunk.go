package record

// chunk is what one event's JSON says, as far as a recording cares. The
// walk functions below fill it; text goes straight into the Stream's
// buffers so nothing is copied twice.
type chunk struct {
	s          *Stream
	choices    int   // elements of "choices"
	usage      bool  // a non-null "usage" object was present
	prompt     int64 // usage.prompt_tokens, -1 if absent
	completion int64 // usage.completion_tokens, -1 if absent
	cached     int64 // usage.prompt_tokens_details.cached_tokens, -1 if absent
	isError    bool  // "error" present (not null), or "object":"error"
	errMsg     []byte
}

func (c *chunk) reset(s *Stream) {
	c.s, c.choices, c.usage, c.isError = s, 0, false, false
	c.prompt, c.completion, c.cached = -1, -1, -1
	c.errMsg = c.errMsg[:0]
}

// parseChunk walks one event's JSON object; it returns false when data is
// not a single valid JSON object.
func parseChunk(c *chunk, data []byte) bool {
	i := skipWS(data, 0)
	i = walkObject(data, i, 0, c, chunkField)
	return i >= 0 && skipWS(data, i) == len(data)
}

func chunkField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "choices":
		i = skipWS(b, i)
		if i < len(b) && b[i] == 'n' {
			return literal(b, i, "null")
		}
		return walkArray(b, i, depth+1, c, choiceElem)
	case "usage":
		i = skipWS(b, i)
		if i < len(b) && b[i] == '{' {
			c.usage = true
			return walkObject(b, i, depth+1, c, usageField)
		}
		return skipValue(b, i, depth)
	case "error":
		i = skipWS(b, i)
		if i < len(b) {
			switch b[i] {
			case 'n':
				return literal(b, i, "null")
			case '{':
				c.isError = true
				return walkObject(b, i, depth+1, c, errorField)
			case '"':
				c.isError = true
				i, c.errMsg = appendString(b, i, c.errMsg[:0])
				return i
			}
		}
		c.isError = true
		return skipValue(b, i, depth)
	case "object":
		// vLLM's older error shape: {"object":"error","message":...}.
		start := len(c.errMsg)
		i, c.errMsg = appendString(b, i, c.errMsg)
		if string(c.errMsg[start:]) == "error" {
			c.isError = true
		}
		c.errMsg = c.errMsg[:start]
		return i
	case "message":
		i = skipWS(b, i)
		if i < len(b) && b[i] == '"' {
			i, c.errMsg = appendString(b, i, c.errMsg[:0])
			return i
		}
		return skipValue(b, i, depth)
	}
	return skipValue(b, i, depth)
}

func choiceElem(c *chunk, b []byte, i, depth int) int {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return skipValue(b, i, depth)
	}
	c.choices++
	return walkObject(b, i, depth+1, c, choiceField)
}

func choiceField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "delta", "message": // streaming chat, non-streaming chat
		i = skipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return walkObject(b, i, depth+1, c, deltaField)
		}
	case "text": // completions
		return textValue(b, i, depth, &c.s.content)
	case "finish_reason":
		return finishReason(c, b, i, depth)
	}
	return skipValue(b, i, depth)
}

func deltaField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "content":
		return textValue(b, i, depth, &c.s.content)
	case "reasoning_content", "reasoning":
		return textValue(b, i, depth, &c.s.reasoning)
	case "tool_calls":
		return toolCallsValue(c, b, i, depth)
	}
	return skipValue(b, i, depth)
}

// textValue appends a string value to *dst; null and other types (content
// parts) are skipped.
func textValue(b []byte, i, depth int, dst *[]byte) int {
	i = skipWS(b, i)
	if i < len(b) && b[i] == '"' {
		i, *dst = appendString(b, i, *dst)
		return i
	}
	return skipValue(b, i, depth)
}

func usageField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "prompt_tokens":
		i, c.prompt = readInt(b, i)
		return i
	case "completion_tokens":
		i, c.completion = readInt(b, i)
		return i
	case "prompt_tokens_details":
		i = skipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return walkObject(b, i, depth+1, c, detailsField)
		}
	}
	return skipValue(b, i, depth)
}

func detailsField(c *chunk, key, b []byte, i, depth int) int {
	if string(key) == "cached_tokens" {
		i, c.cached = readInt(b, i)
		return i
	}
	return skipValue(b, i, depth)
}

func errorField(c *chunk, key, b []byte, i, depth int) int {
	if string(key) == "message" {
		i = skipWS(b, i)
		if i < len(b) && b[i] == '"' {
			i, c.errMsg = appendString(b, i, c.errMsg[:0])
			return i
		}
	}
	return skipValue(b, i, depth)
}
