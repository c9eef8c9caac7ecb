"""Attachments: files people share, read into what the model gets (images, PDFs, text), bounded
and safe.

`intake.AttachmentIntake` is the host's one entry point (fetch through the channel, read, store);
`read` decides what a file is; `images` (the only Pillow importer) and `pdf` (the only pypdf
importer) decode; `tool` is the read-only `read_attachment` tool. Nothing is imported here, so
the light modules (the tool's spec) load without the image and PDF libraries.
"""
