package pgwire

import (
	"github.com/jackc/pgx/v5/pgproto3"
)

// SQLSTATEs of Harbormaster's own, class HM (docs/pgwire.md). A client
// reads the request id of HM001 and HM002 from the error's Where field
// (W), which holds the id alone; Detail and Hint name it too.
const (
	// StateReferred: the statement was referred to a human and waits in
	// the queue; nothing ran. Wait with SELECT harbormaster_wait('req_...').
	StateReferred = "HM001"
	// StateRefused: the statement would have been referred, but the
	// agent's referral rate or waiting cap is used up; it was recorded,
	// not queued, and nothing ran.
	StateRefused = "HM002"
	// StateNotRecorded: the decision could not be written to the logbook,
	// so nothing ran; try again later.
	StateNotRecorded = "HM003"
	// StateNotDescribed: a Describe of a prepared statement that the
	// front cannot answer: sent with its values, the statement would be
	// referred (or its Pilot refused, or could not be reached). Nothing
	// ran, nothing was recorded.
	StateNotDescribed = "HM004"
)

// Standard SQLSTATEs the front answers with.
const (
	stateSyntax                = "42601"
	stateFeature               = "0A000"
	stateProtocol              = "08P01"
	stateInvalidAuth           = "28000"
	statePassword              = "28P01"
	stateNoDatabase            = "3D000"
	stateTooMany               = "53300"
	stateProgramLimit          = "54000"
	stateCanceled              = "57014"
	stateInternal              = "XX000"
	stateUndefinedObject       = "42704"
	stateDuplicatePrepared     = "42P05"
	stateUndefinedPrepared     = "26000"
	stateUndefinedPortal       = "34000"
	stateInvalidParameter      = "22023"
	stateInvalidText           = "22P02"
	stateCharNotInRepertory    = "22021"
	stateDatatypeMismatch      = "42804"
	stateAdminShutdown         = "57P01"
	stateInsufficientPrivilege = "42501"
	stateActiveTransaction     = "25001"
	stateOutOfRange            = "22003"
)

// wireError is an error the client reads as an ErrorResponse.
type wireError struct {
	Fatal   bool
	Code    string
	Message string
	Detail  string
	Hint    string
	Where   string
}

func (e *wireError) Error() string { return e.Message }

func (e *wireError) response() *pgproto3.ErrorResponse {
	sev := "ERROR"
	if e.Fatal {
		sev = "FATAL"
	}
	return &pgproto3.ErrorResponse{Severity: sev, SeverityUnlocalized: sev, Code: e.Code, Message: e.Message,
		Detail: e.Detail, Hint: e.Hint, Where: e.Where}
}

func errorf(code, msg string) *wireError { return &wireError{Code: code, Message: msg} }

func fatal(code, msg string) *wireError { return &wireError{Fatal: true, Code: code, Message: msg} }
