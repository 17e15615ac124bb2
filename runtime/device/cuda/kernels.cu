// placeholder until the cuda backend lands
