package api

import "net/http"

// DecideBody is the body of POST /v1/approvals/{id}.
type DecideBody struct {
	// Decision is "allow" or "deny".
	Decision string `json:"decision"`
}

// DecideResponse is the answer to POST /v1/approvals/{id}.
type DecideResponse struct {
	ID       string `json:"id"`
	Decision string `json:"decision"`
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) error {
	list, err := s.b.ListApprovals(r.Context())
	return answerList(w, list, err)
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id", "approval")
	if err != nil {
		return err
	}
	var body DecideBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if body.Decision != "allow" && body.Decision != "deny" {
		return badRequest(`decision must be "allow" or "deny"`)
	}
	return answer(w, http.StatusOK, DecideResponse{ID: id, Decision: body.Decision}, s.b.Decide(r.Context(), id, body.Decision == "allow"))
}
