"""Voice notes transcribed on this machine: faster-whisper (CTranslate2, int8 on the CPU) with a
model that is installed with the `voice` extra or named by `voice.model`, never downloaded.

`settings` is the `[voice]` section; `model` finds the model's files and checks them against
their sha256 before anything loads them; `whisper` (the only importer of faster_whisper,
ctranslate2 and av) decodes and transcribes; `local` is the `Transcriber` the attachment intake
uses, which bounds how many run at once and for how long. Nothing is imported here, so the
settings load without the extra installed.
"""
