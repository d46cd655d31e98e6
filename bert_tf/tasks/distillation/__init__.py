"""Task distillation: a smaller student of a fine-tuned run (`bert-train --task=distillation`)."""
