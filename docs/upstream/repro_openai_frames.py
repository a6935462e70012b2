"""Minimal reproduction: lmms-eval's to_openai_messages sends wrong frames for a list of PIL frames."""
import base64, io, sys
import numpy as np
from PIL import Image
from lmms_eval.protocol import ChatMessages

if "--fix" in sys.argv:
    from lmms_eval_plugins.compat import fixes; fixes.install()

# 16 frames, frame i is a flat grey of value 10*i, so its number can be read back from any pixel.
frames = [Image.fromarray(np.full((56, 56, 3), 10 * i, np.uint8)) for i in range(15)]
chat = ChatMessages(messages=[{"role": "user", "content": [{"type": "video", "url": frames}, {"type": "text", "text": "?"}]}])
for attempt in range(3):
    sent = chat.to_openai_messages(video_kwargs={"nframes": 15})[0]["content"]
    got = [round(np.asarray(Image.open(io.BytesIO(base64.b64decode(c["image_url"]["url"].split(",", 1)[1]))))[0, 0, 0] / 10)
           for c in sent if c["type"] == "image_url"]
    print(f"sent 0..14, arrived {got}")
