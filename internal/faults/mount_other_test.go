//go:build !linux

package faults_test

import "errors"

func mountTmpfs(string, int64) (func() error, error) {
	return nil, errors.ErrUnsupported
}
