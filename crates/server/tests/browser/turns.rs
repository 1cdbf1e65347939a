//! Turns that outlive their run: resume, downloads and file references.
