package llmtest

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
)

// openAIRenderer speaks OpenAI chat completions.
type openAIRenderer struct{}

func (openAIRenderer) path() string { return "/v1/chat/completions" }

func (openAIRenderer) check(r *http.Request) (int, string) {
	if !isJSON(r) {
		return http.StatusBadRequest, "Content-Type must be application/json"
	}
	return 0, ""
}

func (openAIRenderer) decode(body map[string]any, req *Request) error {
	msgs, ok := body["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return errors.New("'messages' is a required property")
	}
	if req.Model == "" {
		return errors.New("'model' is a required property")
	}
	var system, user []string
	for _, m := range msgs {
		msg, ok := m.(map[string]any)
		if !ok {
			return errors.New("each message must be an object")
		}
		text, err := messageText(msg["content"])
		if err != nil {
			return err
		}
		switch msg["role"] {
		case "system", "developer":
			system = append(system, text)
		case "user":
			user = append(user, text)
		case "assistant", "tool":
		default:
			return fmt.Errorf("invalid message role %v", msg["role"])
		}
	}
	req.System, req.User = joinNonEmpty(system), joinNonEmpty(user)
	if rf, ok := body["response_format"].(map[string]any); ok && rf["type"] == "json_schema" {
		js, ok := rf["json_schema"].(map[string]any)
		if !ok {
			return errors.New("response_format.json_schema is required")
		}
		if name, _ := js["name"].(string); name == "" {
			return errors.New("response_format.json_schema.name is required")
		}
		req.Schema, _ = js["schema"].(map[string]any)
	}
	req.MaxTokens = intField(body["max_completion_tokens"])
	if req.MaxTokens == 0 {
		req.MaxTokens = intField(body["max_tokens"])
	}
	return nil
}

func (openAIRenderer) writeError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	w.Header().Set("x-request-id", "req_scripted")
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil},
	})
}

func (openAIRenderer) writeAnswer(w http.ResponseWriter, req Request, resp Response) {
	message := map[string]any{"role": "assistant", "content": resp.Text, "refusal": nil}
	finish := "stop"
	switch {
	case resp.Refusal != "":
		message["content"] = nil
		message["refusal"] = resp.Refusal
	case resp.Truncated:
		finish = "length"
	}
	w.Header().Set("x-request-id", "req_scripted")
	writeJSON(w, http.StatusOK, map[string]any{
		"id":      "chatcmpl-scripted",
		"object":  "chat.completion",
		"created": 1767225600,
		"model":   req.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       message,
			"logprobs":      nil,
			"finish_reason": finish,
		}},
		"usage": map[string]any{
			"prompt_tokens":     len(req.System+req.User) / 4,
			"completion_tokens": len(resp.Text) / 4,
			"total_tokens":      (len(req.System+req.User) + len(resp.Text)) / 4,
		},
		"system_fingerprint": "fp_scripted",
	})
}

// anthropicRenderer speaks the Anthropic messages API.
type anthropicRenderer struct{}

func (anthropicRenderer) path() string { return "/v1/messages" }

func (anthropicRenderer) check(r *http.Request) (int, string) {
	if r.Header.Get("anthropic-version") == "" {
		return http.StatusBadRequest, "anthropic-version: header is required"
	}
	if !isJSON(r) {
		return http.StatusBadRequest, "Content-Type must be application/json"
	}
	return 0, ""
}

func (anthropicRenderer) decode(body map[string]any, req *Request) error {
	if req.Model == "" {
		return errors.New("model: Field required")
	}
	req.MaxTokens = intField(body["max_tokens"])
	if req.MaxTokens < 1 {
		return errors.New("max_tokens: Field required")
	}
	msgs, ok := body["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return errors.New("messages: Field required")
	}
	system, err := messageText(body["system"])
	if err != nil {
		return fmt.Errorf("system: %w", err)
	}
	var user []string
	for _, m := range msgs {
		msg, ok := m.(map[string]any)
		if !ok {
			return errors.New("messages: each message must be an object")
		}
		text, err := messageText(msg["content"])
		if err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		switch msg["role"] {
		case "user":
			user = append(user, text)
		case "assistant":
		default:
			return fmt.Errorf("messages: unexpected role %v", msg["role"])
		}
	}
	req.System, req.User = system, joinNonEmpty(user)
	if oc, ok := body["output_config"].(map[string]any); ok {
		if f, ok := oc["format"].(map[string]any); ok {
			if f["type"] != "json_schema" {
				return errors.New("output_config.format.type: must be json_schema")
			}
			req.Schema, _ = f["schema"].(map[string]any)
			if req.Schema == nil {
				return errors.New("output_config.format.schema: Field required")
			}
		}
	}
	return nil
}

func (anthropicRenderer) writeError(w http.ResponseWriter, status int, msg string) {
	typ := "api_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == 529:
		typ = "overloaded_error"
	case status < 500:
		typ = "invalid_request_error"
	}
	w.Header().Set("request-id", "req_scripted")
	writeJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": "req_scripted",
	})
}

func (anthropicRenderer) writeAnswer(w http.ResponseWriter, req Request, resp Response) {
	content := []any{}
	stop := "end_turn"
	var details any
	switch {
	case resp.Refusal != "":
		stop = "refusal"
		details = map[string]any{"type": "refusal", "category": "general_harms", "explanation": resp.Refusal}
	case resp.Truncated:
		stop = "max_tokens"
	}
	if resp.Text != "" || (resp.Refusal == "" && !resp.Truncated) {
		content = append(content, map[string]any{"type": "text", "text": resp.Text})
	}
	w.Header().Set("request-id", "req_scripted")
	writeJSON(w, http.StatusOK, map[string]any{
		"id":            "msg_scripted",
		"type":          "message",
		"role":          "assistant",
		"model":         req.Model,
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"stop_details":  details,
		"container":     nil,
		"usage": map[string]any{
			"input_tokens":  len(req.System+req.User) / 4,
			"output_tokens": len(resp.Text) / 4,
		},
	})
}

func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}
