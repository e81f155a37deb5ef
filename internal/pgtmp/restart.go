package pgtmp

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// ErrWrongState is returned by Restart when the server is running, and by
// Crash when it is not.
var ErrWrongState = errors.New("pgtmp: the server is not in the state the call needs")

// Crash stops the server abruptly, the way a crash or a failover leaves
// it: an immediate shutdown (SIGQUIT to the postmaster), so backends end
// at once, transactions in flight never commit, clients see their
// connections close, and the next start runs crash recovery. The data
// directory stays; Restart starts the server on it again. What survives is
// what the server had written: a server started with Fast (fsync off) and
// synchronous_commit on keeps every acknowledged commit, since only the
// process dies, not the machine.
func (s *Server) Crash() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.proc.exited() {
		return fmt.Errorf("pgtmp: crash: %w", ErrWrongState)
	}
	if err := s.proc.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return fmt.Errorf("pgtmp: crash: %w", err)
	}
	<-s.proc.done
	s.logger.Debug("pgtmp: server crashed (immediate shutdown)", "port", s.port)
	return nil
}

// Restart starts a crashed server again on the same data directory and
// port, and returns once it accepts connections (after crash recovery).
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	if !s.proc.exited() {
		return fmt.Errorf("pgtmp: restart: %w", ErrWrongState)
	}
	p, err := s.restart()
	if err != nil {
		return fmt.Errorf("pgtmp: restart: %w", err)
	}
	s.proc = p
	if err := s.waitReady(ctx); err != nil {
		return fmt.Errorf("pgtmp: restart: %w", err)
	}
	return nil
}
