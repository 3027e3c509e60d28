//! placeholder: see the module's issue.
